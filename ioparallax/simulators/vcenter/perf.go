package main

import (
	"math"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"
)

// RealtimeInterval is vCenter's realtime sampling period (intervalId 20).
const RealtimeInterval = 20

// realtimeSamples is how many realtime samples vCenter keeps (one hour).
const realtimeSamples = 180

// historicalRetention: samples kept per roll-up interval (day, week, month, year).
var historicalRetention = map[int64]int64{300: 288, 1800: 336, 7200: 360, 86400: 365}

// counterKind says how a per-instance counter is computed from one 20 s window of a disk
// and how it is rolled up into longer intervals.
type counterKind struct {
	name   string // group.name.rollup as vCenter names it
	rollup string // "average": mean of 20 s values; "latest": last 20 s value of the interval
	value  func(w window) int64
}

// window holds the integrated ground truth of one disk over `seconds` seconds.
type window struct {
	seconds float64
	q       [nQuantities]float64
}

func round(v float64) int64 { return int64(math.Floor(v + 0.5)) }

func perOp(sum, ops, scale float64) int64 {
	if ops <= 0 {
		return 0
	}
	return round(sum / ops * scale)
}

// virtualDiskCounters: the per-instance (scsiX:Y) counters we serve, in vCenter's units:
// KBps and IO/s averaged over the interval, latency I/O-weighted in integer ms (and us),
// outstanding I/Os time-averaged, request size in bytes, seeks counted in the interval.
var virtualDiskCounters = []counterKind{
	{"virtualDisk.read.average", "average", func(w window) int64 { return round(w.q[qReadBytes] / 1024 / w.seconds) }},
	{"virtualDisk.write.average", "average", func(w window) int64 { return round(w.q[qWriteBytes] / 1024 / w.seconds) }},
	{"virtualDisk.numberReadAveraged.average", "average", func(w window) int64 { return round(w.q[qReadOps] / w.seconds) }},
	{"virtualDisk.numberWriteAveraged.average", "average", func(w window) int64 { return round(w.q[qWriteOps] / w.seconds) }},
	{"virtualDisk.totalReadLatency.average", "average", func(w window) int64 { return perOp(w.q[qReadLatencySum], w.q[qReadOps], 1e3) }},
	{"virtualDisk.totalWriteLatency.average", "average", func(w window) int64 { return perOp(w.q[qWriteLatencySum], w.q[qWriteOps], 1e3) }},
	{"virtualDisk.readLatencyUS.latest", "latest", func(w window) int64 { return perOp(w.q[qReadLatencySum], w.q[qReadOps], 1e6) }},
	{"virtualDisk.writeLatencyUS.latest", "latest", func(w window) int64 { return perOp(w.q[qWriteLatencySum], w.q[qWriteOps], 1e6) }},
	{"virtualDisk.readOIO.latest", "latest", func(w window) int64 { return round(w.q[qReadOutstanding] / w.seconds) }},
	{"virtualDisk.writeOIO.latest", "latest", func(w window) int64 { return round(w.q[qWriteOutstanding] / w.seconds) }},
	{"virtualDisk.readIOSize.latest", "latest", func(w window) int64 { return perOp(w.q[qReadBytes], w.q[qReadOps], 1) }},
	{"virtualDisk.writeIOSize.latest", "latest", func(w window) int64 { return perOp(w.q[qWriteBytes], w.q[qWriteOps], 1) }},
	// Sequential I/Os seek less than 64 LBNs, random ones further than 8192 (the categorizer's split).
	{"virtualDisk.smallSeeks.latest", "latest", func(w window) int64 {
		return round(w.q[qReadOps] + w.q[qWriteOps] - w.q[qReadRandomOps] - w.q[qWriteRandomOps])
	}},
	{"virtualDisk.mediumSeeks.latest", "latest", func(w window) int64 { return 0 }},
	{"virtualDisk.largeSeeks.latest", "latest", func(w window) int64 { return round(w.q[qReadRandomOps] + w.q[qWriteRandomOps]) }},
}

// maxTotalLatencyName is the VM-level aggregate (instance ""): highest latency across the disks.
const maxTotalLatencyName = "disk.maxTotalLatency.latest"

// vmDisk is one virtual disk as the performance manager sees it.
type vmDisk struct {
	instance string // scsi0:1
	series   *diskSeries
}

// ScenarioPerf replaces the simulator's PerformanceManager: what vCenter would compute from
// the per-second ground truth, with aligned ascending timestamps, `*` expanded and zeros kept.
type ScenarioPerf struct {
	*simulator.PerformanceManager

	mu         sync.RWMutex
	disks      map[string][]vmDisk   // VM moref value -> disks
	cpu        map[string]*cpuSeries // VM or host moref value -> CPU (cpu.go)
	cpuKeys    map[int32]int         // counter key -> index in cpuCounters
	counters   map[int32]*counterKind
	maxLatency int32 // counter key of disk.maxTotalLatency.latest (0 if absent)
	keyOf      map[string]int32
	clock      func() time.Time
	maxMetrics int   // config.vpxd.stats.maxQueryMetrics; 0 = unlimited
	gate       *gate // QueryPerf waits here while a test holds it (control.go)
}

func newScenarioPerf(pm *simulator.PerformanceManager, clock func() time.Time, maxMetrics int) *ScenarioPerf {
	p := &ScenarioPerf{
		PerformanceManager: pm,
		disks:              map[string][]vmDisk{},
		cpu:                map[string]*cpuSeries{},
		cpuKeys:            map[int32]int{},
		counters:           map[int32]*counterKind{},
		keyOf:              map[string]int32{},
		clock:              clock,
		maxMetrics:         maxMetrics,
	}
	for _, info := range pm.PerfCounter {
		name := info.GroupInfo.GetElementDescription().Key + "." + info.NameInfo.GetElementDescription().Key + "." + string(info.RollupType)
		p.keyOf[name] = info.Key
	}
	for i := range virtualDiskCounters {
		c := &virtualDiskCounters[i]
		if key, ok := p.keyOf[c.name]; ok {
			p.counters[key] = c
		}
	}
	p.maxLatency = p.keyOf[maxTotalLatencyName]
	for i, c := range cpuCounters {
		if key, ok := p.keyOf[c.name]; ok {
			p.cpuKeys[key] = i
		}
	}
	return p
}

func (p *ScenarioPerf) addCPU(moref string, s *cpuSeries) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cpu[moref] = s
}

func (p *ScenarioPerf) cpuOf(moref string) (*cpuSeries, bool) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	s, ok := p.cpu[moref]
	return s, ok
}

// cpuMetrics: the CPU counters of an entity with a CPU series (instance "": the aggregate).
func (p *ScenarioPerf) cpuMetrics() []types.PerfMetricId {
	var ids []types.PerfMetricId
	for _, c := range cpuCounters {
		if key, ok := p.keyOf[c.name]; ok {
			ids = append(ids, types.PerfMetricId{CounterId: key, Instance: ""})
		}
	}
	return ids
}

func (p *ScenarioPerf) addVM(moref string, disks []vmDisk) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.disks[moref] = disks
}

func (p *ScenarioPerf) vmDisks(moref string) ([]vmDisk, bool) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	d, ok := p.disks[moref]
	return d, ok
}

// availableMetrics: every counter x instance a VM has, sorted by counter then instance.
func (p *ScenarioPerf) availableMetrics(disks []vmDisk) []types.PerfMetricId {
	keys := make([]int32, 0, len(p.counters))
	for k := range p.counters {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	var ids []types.PerfMetricId
	for _, k := range keys {
		for _, d := range disks {
			ids = append(ids, types.PerfMetricId{CounterId: k, Instance: d.instance})
		}
	}
	if p.maxLatency != 0 {
		ids = append(ids, types.PerfMetricId{CounterId: p.maxLatency, Instance: ""})
	}
	return ids
}

func (p *ScenarioPerf) QueryAvailablePerfMetric(ctx *simulator.Context, req *types.QueryAvailablePerfMetric) soap.HasFault {
	disks, ok := p.vmDisks(req.Entity.Value)
	_, hasCPU := p.cpuOf(req.Entity.Value)
	if !hasCPU && (req.Entity.Type != "VirtualMachine" || !ok) {
		return p.PerformanceManager.QueryAvailablePerfMetric(ctx, req)
	}
	body := new(methods.QueryAvailablePerfMetricBody)
	body.Res = new(types.QueryAvailablePerfMetricResponse)
	if req.IntervalId != 0 && !p.validInterval(int64(req.IntervalId)) {
		body.Fault_ = simulator.Fault("", &types.InvalidArgument{InvalidProperty: "intervalId"})
		return body
	}
	if ok {
		body.Res.Returnval = p.availableMetrics(disks)
	}
	if hasCPU {
		body.Res.Returnval = append(body.Res.Returnval, p.cpuMetrics()...)
	}
	return body
}

func (p *ScenarioPerf) validInterval(i int64) bool {
	if i == RealtimeInterval {
		return true
	}
	_, ok := historicalRetention[i]
	return ok
}

// sampleTimes: the interval-end timestamps (epoch seconds, ascending) a spec asks for.
func (p *ScenarioPerf) sampleTimes(qs *types.PerfQuerySpec, interval int64) []int64 {
	now := p.clock().Unix()
	latest, _ := floorDiv(now, interval)
	latest *= interval
	keep := int64(realtimeSamples)
	if interval != RealtimeInterval {
		keep = historicalRetention[interval]
	}
	first := latest - (keep-1)*interval
	if qs.StartTime != nil { // startTime is exclusive
		s := qs.StartTime.Unix()
		q, _ := floorDiv(s, interval)
		if c := (q + 1) * interval; c > first {
			first = c
		}
	}
	last := latest
	if qs.EndTime != nil { // endTime is inclusive
		e := qs.EndTime.Unix()
		q, _ := floorDiv(e, interval)
		if c := q * interval; c < last {
			last = c
		}
	}
	if last < first {
		return nil
	}
	n := (last-first)/interval + 1
	if qs.MaxSample > 0 && n > int64(qs.MaxSample) { // the most recent maxSample samples
		first = last - int64(qs.MaxSample-1)*interval
		n = int64(qs.MaxSample)
	}
	out := make([]int64, n)
	for i := range out {
		out[i] = first + int64(i)*interval
	}
	return out
}

func realtimeWindow(s *diskSeries, end int64) window {
	w := window{seconds: RealtimeInterval}
	for q := 0; q < nQuantities; q++ {
		w.q[q] = s.sum(q, end-RealtimeInterval, end)
	}
	return w
}

// value of counter c for disk d in the sample that ends at `end`, for interval `interval`.
// Roll-ups are computed from the 20 s values as vCenter stores them (integers): the mean for
// "average" counters (an average of averages, not weighted by I/O count) and the last value
// for "latest" counters.
func counterValue(c *counterKind, s *diskSeries, end, interval int64) int64 {
	if interval == RealtimeInterval {
		return c.value(realtimeWindow(s, end))
	}
	if c.rollup == "latest" {
		return c.value(realtimeWindow(s, end))
	}
	n := interval / RealtimeInterval
	var total int64
	for t := end - interval + RealtimeInterval; t <= end; t += RealtimeInterval {
		total += c.value(realtimeWindow(s, t))
	}
	return round(float64(total) / float64(n))
}

func maxTotalLatency(p *ScenarioPerf, disks []vmDisk, end, interval int64) int64 {
	r := p.counters[p.keyOf["virtualDisk.totalReadLatency.average"]]
	w := p.counters[p.keyOf["virtualDisk.totalWriteLatency.average"]]
	var m int64
	for _, d := range disks {
		for _, c := range []*counterKind{r, w} {
			if c == nil {
				continue
			}
			if v := c.value(realtimeWindow(d.series, end)); v > m {
				m = v
			}
		}
	}
	_ = interval
	return m
}

type seriesOut struct {
	id     types.PerfMetricId
	values []int64
}

func (p *ScenarioPerf) QueryPerf(ctx *simulator.Context, req *types.QueryPerf) soap.HasFault {
	if p.gate != nil {
		p.gate.pass()
	}
	body := new(methods.QueryPerfBody)
	body.Res = new(types.QueryPerfResponse)

	if p.maxMetrics > 0 {
		n := 0
		for _, qs := range req.QuerySpec {
			if len(qs.MetricId) == 0 {
				n++
			}
			n += len(qs.MetricId)
		}
		if n > p.maxMetrics {
			body.Fault_ = simulator.Fault("querySpec.size exceeds config.vpxd.stats.maxQueryMetrics="+strconv.Itoa(p.maxMetrics),
				&types.InvalidArgument{InvalidProperty: "querySpec.size"})
			return body
		}
	}

	for i := range req.QuerySpec {
		qs := &req.QuerySpec[i]
		interval := int64(qs.IntervalId)
		if interval <= 0 {
			interval = RealtimeInterval
		}
		if !p.validInterval(interval) {
			body.Fault_ = simulator.Fault("", &types.InvalidArgument{InvalidProperty: "querySpec.interval"})
			body.Res = nil
			return body
		}
		disks, ok := p.vmDisks(qs.Entity.Value)
		if qs.Entity.Type != "VirtualMachine" {
			ok = false
		}
		cpu, hasCPU := p.cpuOf(qs.Entity.Value)
		if !ok && !hasCPU {
			// Hosts, clusters, datastores: govmomi's canned series, as stock vcsim serves them.
			body.Res.Returnval = append(body.Res.Returnval, p.stockQuery(ctx, *qs)...)
			continue
		}
		times := p.sampleTimes(qs, interval)
		if len(times) == 0 {
			continue
		}
		ids := qs.MetricId
		if len(ids) == 0 {
			if ok {
				ids = p.availableMetrics(disks)
			}
			if hasCPU {
				ids = append(ids, p.cpuMetrics()...)
			}
		}
		var out []seriesOut
		var others []types.PerfMetricId
		for _, id := range ids {
			if _, known := p.counters[id.CounterId]; !known && id.CounterId != p.maxLatency {
				if ci, isCPU := p.cpuKeys[id.CounterId]; isCPU && hasCPU {
					if id.Instance != "" && id.Instance != "*" {
						continue // per-vCPU instances are not simulated
					}
					vals := make([]int64, len(times))
					for k, t := range times {
						vals[k] = cpuValue(ci, cpu, t, interval)
					}
					out = append(out, seriesOut{types.PerfMetricId{CounterId: id.CounterId, Instance: ""}, vals})
					continue
				}
				others = append(others, id)
			}
		}
		if len(others) > 0 {
			out = append(out, p.stockSeries(ctx, qs, others, times, interval)...)
		}
		for _, id := range ids {
			if id.CounterId == p.maxLatency && p.maxLatency != 0 {
				if !ok {
					continue
				}
				if id.Instance != "" && id.Instance != "*" {
					continue
				}
				vals := make([]int64, len(times))
				for k, t := range times {
					vals[k] = maxTotalLatency(p, disks, t, interval)
				}
				out = append(out, seriesOut{types.PerfMetricId{CounterId: id.CounterId, Instance: ""}, vals})
				continue
			}
			c, known := p.counters[id.CounterId]
			if !known {
				continue
			}
			for _, d := range disks {
				if id.Instance != "*" && id.Instance != d.instance {
					continue
				}
				vals := make([]int64, len(times))
				for k, t := range times {
					vals[k] = counterValue(c, d.series, t, interval)
				}
				out = append(out, seriesOut{types.PerfMetricId{CounterId: id.CounterId, Instance: d.instance}, vals})
			}
		}
		if len(out) == 0 {
			continue
		}
		body.Res.Returnval = append(body.Res.Returnval, entityMetric(qs, times, interval, out))
	}
	return body
}

// PerfMetricIntSeries has the same XML type name as vim25's, but keeps zero values: vim25's
// field is tagged omitempty, which drops each 0 from the series on the wire (stock vcsim's
// behaviour, which leaves a client unable to align values with sample infos).
type PerfMetricIntSeries struct {
	types.PerfMetricSeries
	Value []int64 `xml:"value"`
}

func entityMetric(qs *types.PerfQuerySpec, times []int64, interval int64, out []seriesOut) types.BasePerfEntityMetricBase {
	if qs.Format == string(types.PerfFormatCsv) {
		m := &types.PerfEntityMetricCSV{}
		m.Entity = qs.Entity
		info := make([]string, 0, 2*len(times))
		for _, t := range times {
			info = append(info, strconv.FormatInt(interval, 10), time.Unix(t, 0).UTC().Format(time.RFC3339))
		}
		m.SampleInfoCSV = strings.Join(info, ",")
		m.Value = make([]types.PerfMetricSeriesCSV, len(out))
		buf := make([]byte, 0, 16*len(times))
		for i, s := range out {
			buf = buf[:0]
			for k, v := range s.values {
				if k > 0 {
					buf = append(buf, ',')
				}
				buf = strconv.AppendInt(buf, v, 10)
			}
			m.Value[i].Id = s.id
			m.Value[i].Value = string(buf)
		}
		return m
	}
	m := &types.PerfEntityMetric{}
	m.Entity = qs.Entity
	m.SampleInfo = make([]types.PerfSampleInfo, len(times))
	for i, t := range times {
		m.SampleInfo[i] = types.PerfSampleInfo{Timestamp: time.Unix(t, 0).UTC(), Interval: int32(interval)}
	}
	m.Value = make([]types.BasePerfMetricSeries, len(out))
	for i, s := range out {
		ser := &PerfMetricIntSeries{Value: s.values}
		ser.Id = s.id
		m.Value[i] = ser
	}
	return m
}

// stockQuery answers a spec with govmomi's own PerformanceManager (canned lab series).
func (p *ScenarioPerf) stockQuery(ctx *simulator.Context, qs types.PerfQuerySpec) []types.BasePerfEntityMetricBase {
	// govmomi's canned series end at the wall clock's now and count back to startTime: a startTime
	// after it (a scenario clock frozen or moved ahead of the wall clock, as the exporter's newest
	// sample is) made a negative sample count and a panic that left the request unanswered. A
	// vCenter with nothing newer than startTime answers no sample.
	end := time.Now()
	if qs.EndTime != nil {
		end = *qs.EndTime
	}
	if qs.StartTime != nil && !qs.StartTime.Before(end) {
		return nil
	}
	res, ok := p.PerformanceManager.QueryPerf(ctx, &types.QueryPerf{This: p.Self, QuerySpec: []types.PerfQuerySpec{qs}}).(*methods.QueryPerfBody)
	if !ok || res.Res == nil {
		return nil
	}
	return res.Res.Returnval
}

// stockSeries: counters other than the virtual disk ones (cpu, mem, net...) for a scenario VM,
// from govmomi's canned data, put on our aligned ascending timestamps.
func (p *ScenarioPerf) stockSeries(ctx *simulator.Context, qs *types.PerfQuerySpec, ids []types.PerfMetricId, times []int64, interval int64) []seriesOut {
	end := time.Unix(times[len(times)-1], 0)
	spec := types.PerfQuerySpec{Entity: qs.Entity, MetricId: ids, IntervalId: int32(interval), EndTime: &end, MaxSample: int32(len(times))}
	var out []seriesOut
	for _, m := range p.stockQuery(ctx, spec) {
		em, ok := m.(*types.PerfEntityMetric)
		if !ok {
			continue
		}
		for _, v := range em.Value {
			ser, ok := v.(*types.PerfMetricIntSeries)
			if !ok || len(ser.Value) != len(times) {
				continue
			}
			vals := make([]int64, len(times))
			for i := range vals { // stock answers newest first
				vals[i] = ser.Value[len(times)-1-i]
			}
			out = append(out, seriesOut{ser.Id, vals})
		}
	}
	return out
}
