package main

import (
	"fmt"

	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/types"
)

// traceCPU is one VM's, CVM's or host's CPU per second of the period (Trace._cpu_json):
// usage in MHz (the mean over the second) and ready seconds summed over the vCPUs.
type traceCPU struct {
	VCPUs    int       `json:"vcpus"`
	UsageMHz []float64 `json:"usage_mhz"`
	ReadyS   []float64 `json:"ready_s"`
}

// traceHost is a host of the scenario: its hardware, its CPU and the CVM on it (if any).
type traceHost struct {
	Name   string    `json:"name"`
	CPUMHz int32     `json:"cpu_mhz"` // per core: summary.hardware.cpuMhz
	Cores  int16     `json:"cores"`   // summary.hardware.numCpuCores
	CPU    *traceCPU `json:"cpu"`
	CVM    *struct {
		Name string    `json:"name"`
		CPU  *traceCPU `json:"cpu"`
	} `json:"cvm"`
}

func (c *traceCPU) check(period int, what string) error {
	if c == nil {
		return nil
	}
	if len(c.UsageMHz) != period || len(c.ReadyS) != period {
		return fmt.Errorf("%s: cpu has %d usage and %d ready values, want %d", what, len(c.UsageMHz), len(c.ReadyS), period)
	}
	return nil
}

// cpuSeries is an entity's periodic CPU with prefix sums, like diskSeries.
type cpuSeries struct {
	period, origin int64
	usage, ready   []float64 // prefix sums: MHz-seconds, ready seconds
}

func newCPUSeries(period int, origin int64, c *traceCPU) *cpuSeries {
	s := &cpuSeries{period: int64(period), origin: origin, usage: make([]float64, period+1), ready: make([]float64, period+1)}
	for t := 0; t < period; t++ {
		s.usage[t+1] = s.usage[t] + c.UsageMHz[t]
		s.ready[t+1] = s.ready[t] + c.ReadyS[t]
	}
	return s
}

func (s *cpuSeries) sum(p []float64, a, b int64) float64 {
	qa, ra := floorDiv(a-s.origin, s.period)
	qb, rb := floorDiv(b-s.origin, s.period)
	return float64(qb-qa)*p[s.period] + p[rb] - p[ra]
}

// cpuCounters: what vCenter computes per 20 s for a VM or a host (instance "", the entity's
// aggregate): cpu.usagemhz.average, the mean MHz over the interval; cpu.ready.summation, the
// milliseconds the vCPUs were ready to run and waited for a core, summed over the interval.
var cpuCounters = []struct {
	name  string
	value func(s *cpuSeries, end int64) int64
}{
	{"cpu.usagemhz.average", func(s *cpuSeries, end int64) int64 {
		return round(s.sum(s.usage, end-RealtimeInterval, end) / RealtimeInterval)
	}},
	{"cpu.ready.summation", func(s *cpuSeries, end int64) int64 {
		return round(s.sum(s.ready, end-RealtimeInterval, end) * 1000)
	}},
}

// cpuValue of counter i for the sample that ends at `end`; roll-ups average the 20 s values
// (usage) or add them (ready, a summation).
func cpuValue(i int, s *cpuSeries, end, interval int64) int64 {
	c := cpuCounters[i]
	if interval == RealtimeInterval {
		return c.value(s, end)
	}
	var total int64
	for t := end - interval + RealtimeInterval; t <= end; t += RealtimeInterval {
		total += c.value(s, t)
	}
	if c.name == "cpu.ready.summation" {
		return total
	}
	return round(float64(total) / float64(interval/RealtimeInterval))
}

// cvmPlans: the CVM of each scenario host as a VM without virtual disks (its storage is the
// host's own drives, passed through), on the scenario's first datastore.
func cvmPlans(t *traceFile, datastore string) []vmPlan {
	var plans []vmPlan
	for _, h := range t.Hosts {
		if h.CVM == nil {
			continue
		}
		p := vmPlan{name: h.CVM.Name, host: h.Name, guestOS: "linux", datastore: datastore, cvm: true}
		if h.CVM.CPU != nil {
			p.vcpus = h.CVM.CPU.VCPUs
			p.cpu = newCPUSeries(t.PeriodSeconds, t.OriginSeconds, h.CVM.CPU)
		}
		plans = append(plans, p)
	}
	return plans
}

// addHostCPU gives the model's hosts the scenario's hardware (summary.hardware.cpuMhz and
// numCpuCores, hardware.cpuInfo) and registers their CPU series with the performance manager.
func addHostCPU(model *simulator.Model, perf *ScenarioPerf, t *traceFile) {
	if t == nil {
		return
	}
	byName := map[string]*simulator.HostSystem{}
	for _, e := range model.Map().All("HostSystem") {
		h := e.(*simulator.HostSystem)
		byName[h.Name] = h
	}
	for _, th := range t.Hosts {
		h, ok := byName[th.Name]
		if !ok {
			continue
		}
		if th.CPUMHz > 0 && th.Cores > 0 {
			h.Summary.Hardware.CpuMhz = th.CPUMHz
			h.Summary.Hardware.NumCpuCores = th.Cores
			h.Summary.Hardware.NumCpuThreads = th.Cores
			if h.Hardware != nil {
				h.Hardware.CpuInfo = types.HostCpuInfo{
					NumCpuPackages: 2, NumCpuCores: th.Cores, NumCpuThreads: th.Cores, Hz: int64(th.CPUMHz) * 1_000_000,
				}
			}
		}
		if th.CPU != nil {
			perf.addCPU(h.Self.Value, newCPUSeries(t.PeriodSeconds, t.OriginSeconds, th.CPU))
		}
	}
}

// markServiceVMs puts each CVM's configuration file where the Nutanix installer does, in a
// ServiceVM folder of the host's local datastore (X-Ray recognises a CVM by "servicevm" in it).
func markServiceVMs(model *simulator.Model, plans []vmPlan) {
	cvm := map[string]bool{}
	for _, p := range plans {
		if p.cvm {
			cvm[p.name] = true
		}
	}
	for _, e := range model.Map().All("VirtualMachine") {
		vm := e.(*simulator.VirtualMachine)
		if !cvm[vm.Name] {
			continue
		}
		path := "[NTNX-local-ds-" + vm.Name + "] ServiceVM_Centos/ServiceVM_Centos.vmx"
		if vm.Config != nil {
			vm.Config.Files.VmPathName = path
		}
		vm.Summary.Config.VmPathName = path
	}
}
