package main

import (
	"encoding/json"
	"fmt"
	"os"
)

// traceFile is the per-second ground truth written by `ioparallax-scenario compile`
// (ioparallax/simulators/scenario/trace.py, Trace.to_json).
type traceFile struct {
	Scenario      string `json:"scenario"`
	PeriodSeconds int    `json:"period_seconds"`
	// OriginSeconds is the Unix time at which period second 0 falls (absent: 0, the epoch).
	OriginSeconds int64     `json:"origin_seconds"`
	Cluster       string    `json:"cluster"`
	VMs           []traceVM `json:"vms"`
	// Hosts with their hardware, CPU and CVM (absent in traces written before the simulator
	// served CPU: no CPU served then).
	Hosts []traceHost `json:"hosts"`
}

type traceVM struct {
	Name     string      `json:"name"`
	Host     string      `json:"host"`
	GuestOS  string      `json:"guest_os"` // "linux" or "windows" (older traces: free text)
	Hostname string      `json:"hostname"` // what VMware Tools reports as guest.hostName
	Disks    []traceDisk `json:"disks"`
	CPU      *traceCPU   `json:"cpu"` // absent in traces older than CPU serving: no CPU counters served
}

type traceDisk struct {
	Unit             string    `json:"unit"`
	CapacityBytes    int64     `json:"capacity_bytes"`
	BackingFile      string    `json:"backing_file"`
	UUID             string    `json:"uuid"`
	VdiskID          int64     `json:"vdisk_id"`
	GuestDiskPath    string    `json:"guest_disk_path"` // guest.disk diskPath of its volume ("D:\\"); "" none
	ReadOps          []float64 `json:"read_ops"`
	WriteOps         []float64 `json:"write_ops"`
	ReadBytes        []float64 `json:"read_bytes"`
	WriteBytes       []float64 `json:"write_bytes"`
	ReadLatencyS     []float64 `json:"read_latency_s"`
	WriteLatencyS    []float64 `json:"write_latency_s"`
	ReadOutstanding  []float64 `json:"read_outstanding"`
	WriteOutstanding []float64 `json:"write_outstanding"`
	ReadRandomRatio  []float64 `json:"read_random_ratio"`
	WriteRandomRatio []float64 `json:"write_random_ratio"`
}

func loadTrace(path string) (*traceFile, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var t traceFile
	if err := json.Unmarshal(raw, &t); err != nil {
		return nil, fmt.Errorf("%s: invalid trace JSON: %w", path, err)
	}
	if t.PeriodSeconds <= 0 {
		return nil, fmt.Errorf("%s: period_seconds must be positive", path)
	}
	if t.OriginSeconds < 0 {
		return nil, fmt.Errorf("%s: origin_seconds must be 0 or later, got %d", path, t.OriginSeconds)
	}
	for _, h := range t.Hosts {
		if err := h.CPU.check(t.PeriodSeconds, "host "+h.Name); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if h.CVM != nil {
			if err := h.CVM.CPU.check(t.PeriodSeconds, "cvm "+h.CVM.Name); err != nil {
				return nil, fmt.Errorf("%s: %w", path, err)
			}
		}
	}
	for _, vm := range t.VMs {
		if err := vm.CPU.check(t.PeriodSeconds, "vm "+vm.Name); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		for _, d := range vm.Disks {
			for name, s := range map[string][]float64{
				"read_ops": d.ReadOps, "write_ops": d.WriteOps, "read_bytes": d.ReadBytes,
				"write_bytes": d.WriteBytes, "read_latency_s": d.ReadLatencyS,
				"write_latency_s": d.WriteLatencyS, "read_outstanding": d.ReadOutstanding,
				"write_outstanding": d.WriteOutstanding, "read_random_ratio": d.ReadRandomRatio,
				"write_random_ratio": d.WriteRandomRatio,
			} {
				if len(s) != t.PeriodSeconds {
					return nil, fmt.Errorf("%s: vm %s disk %s: %s has %d values, want %d",
						path, vm.Name, d.Unit, name, len(s), t.PeriodSeconds)
				}
			}
		}
	}
	return &t, nil
}

// Quantities integrated per second; sums over any range of seconds come from prefix sums.
const (
	qReadOps = iota
	qWriteOps
	qReadBytes
	qWriteBytes
	qReadLatencySum // sum over ops of their latency, seconds (ops x mean latency)
	qWriteLatencySum
	qReadOutstanding // integral of outstanding I/Os over time (I/O-seconds)
	qWriteOutstanding
	qReadRandomOps
	qWriteRandomOps
	nQuantities
)

// diskSeries is one virtual disk's periodic ground truth with prefix sums, so that the sum
// over any wall-clock range is O(1) and exact (no float drift from summing epochs).
type diskSeries struct {
	period int64
	origin int64                  // the Unix time at which period second 0 falls
	prefix [nQuantities][]float64 // prefix[q][i] = sum of seconds [0, i) of the period
}

func newDiskSeries(period int, perSecond func(q, t int) float64) *diskSeries {
	s := &diskSeries{period: int64(period)}
	for q := 0; q < nQuantities; q++ {
		p := make([]float64, period+1)
		for t := 0; t < period; t++ {
			p[t+1] = p[t] + perSecond(q, t)
		}
		s.prefix[q] = p
	}
	return s
}

func seriesFromTrace(period int, origin int64, d traceDisk) *diskSeries {
	s := newDiskSeries(period, func(q, t int) float64 {
		switch q {
		case qReadOps:
			return d.ReadOps[t]
		case qWriteOps:
			return d.WriteOps[t]
		case qReadBytes:
			return d.ReadBytes[t]
		case qWriteBytes:
			return d.WriteBytes[t]
		case qReadLatencySum:
			return d.ReadOps[t] * d.ReadLatencyS[t]
		case qWriteLatencySum:
			return d.WriteOps[t] * d.WriteLatencyS[t]
		case qReadOutstanding:
			return d.ReadOutstanding[t]
		case qWriteOutstanding:
			return d.WriteOutstanding[t]
		case qReadRandomOps:
			return d.ReadOps[t] * d.ReadRandomRatio[t]
		case qWriteRandomOps:
			return d.WriteOps[t] * d.WriteRandomRatio[t]
		}
		return 0
	})
	s.origin = origin
	return s
}

func floorDiv(a, b int64) (int64, int64) {
	q, r := a/b, a%b
	if r < 0 {
		q, r = q-1, r+b
	}
	return q, r
}

// sum of quantity q over wall-clock seconds [a, b) (epoch seconds; second t is period second
// (t - origin) mod period, as every ioparallax simulator agrees).
func (s *diskSeries) sum(q int, a, b int64) float64 {
	qa, ra := floorDiv(a-s.origin, s.period)
	qb, rb := floorDiv(b-s.origin, s.period)
	p := s.prefix[q]
	return float64(qb-qa)*p[s.period] + p[rb] - p[ra]
}
