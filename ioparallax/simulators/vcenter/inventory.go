package main

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"
)

// vmPlan is one VM to create: its name, host and disks with their ground truth.
type vmPlan struct {
	name      string
	host      string
	guestOS   string
	hostname  string
	disks     []diskPlan
	vcpus     int        // 0: the simulator's default (2)
	cpu       *cpuSeries // nil: no CPU counters served for it
	datastore string     // where a VM without virtual disks (a CVM) keeps its files
	cvm       bool       // a Nutanix Controller VM
}

type diskPlan struct {
	unit          string // scsi0:1
	capacityBytes int64
	backingFile   string // [ctr01] vm/vm.vmdk
	uuid          string
	guestDiskPath string // the guest volume on this disk, as guest.disk's diskPath ("" none)
	series        *diskSeries
}

var unitRe = regexp.MustCompile(`^(scsi|sata|nvme|ide)(\d+):(\d+)$`)
var datastoreRe = regexp.MustCompile(`^\[([^\]]+)\]\s*(.*)$`)

func plansFromTrace(t *traceFile) ([]vmPlan, error) {
	var plans []vmPlan
	for _, vm := range t.VMs {
		p := vmPlan{name: vm.Name, host: vm.Host, guestOS: vm.GuestOS, hostname: vm.Hostname}
		if vm.CPU != nil {
			p.vcpus = vm.CPU.VCPUs
			p.cpu = newCPUSeries(t.PeriodSeconds, t.OriginSeconds, vm.CPU)
		}
		for _, d := range vm.Disks {
			if !unitRe.MatchString(d.Unit) {
				return nil, fmt.Errorf("vm %s: disk unit %q is not controllerN:unit", vm.Name, d.Unit)
			}
			if !datastoreRe.MatchString(d.BackingFile) {
				return nil, fmt.Errorf("vm %s disk %s: backing file %q is not [datastore] path", vm.Name, d.Unit, d.BackingFile)
			}
			p.disks = append(p.disks, diskPlan{
				unit: d.Unit, capacityBytes: d.CapacityBytes, backingFile: d.BackingFile, uuid: d.UUID,
				guestDiskPath: d.GuestDiskPath, series: seriesFromTrace(t.PeriodSeconds, t.OriginSeconds, d),
			})
		}
		plans = append(plans, p)
	}
	datastore := "ctr01"
	if len(plans) > 0 && len(plans[0].disks) > 0 {
		datastore = datastoreOf(plans[0].disks[0].backingFile)
	}
	return append(plans, cvmPlans(t, datastore)...), nil
}

// syntheticPlans: extra VMs with a steady generated workload (for the scrape benchmark).
func syntheticPlans(n, disksPerVM int, datastore string, hosts []string) []vmPlan {
	plans := make([]vmPlan, 0, n)
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("synthetic-%05d", i+1)
		p := vmPlan{name: name, host: hosts[i%len(hosts)], guestOS: "Linux"}
		for j := 0; j < disksPerVM; j++ {
			readOps := float64(50 + (i*7+j*13)%200)
			writeOps := float64(20 + (i*3+j*5)%80)
			readSize, writeSize := 8192.0, 16384.0
			readLat, writeLat := 0.0004+float64(i%10)*0.0001, 0.0012+float64(j)*0.0003
			s := newDiskSeries(1, func(q, _ int) float64 {
				switch q {
				case qReadOps:
					return readOps
				case qWriteOps:
					return writeOps
				case qReadBytes:
					return readOps * readSize
				case qWriteBytes:
					return writeOps * writeSize
				case qReadLatencySum, qReadOutstanding:
					return readOps * readLat
				case qWriteLatencySum, qWriteOutstanding:
					return writeOps * writeLat
				case qReadRandomOps:
					return readOps * 0.7
				case qWriteRandomOps:
					return writeOps * 0.3
				}
				return 0
			})
			file := name + ".vmdk"
			if j > 0 {
				file = fmt.Sprintf("%s_%d.vmdk", name, j)
			}
			p.disks = append(p.disks, diskPlan{
				unit:          fmt.Sprintf("scsi0:%d", j+1),
				capacityBytes: 20 << 30,
				backingFile:   fmt.Sprintf("[%s] %s/%s", datastore, name, file),
				uuid:          fmt.Sprintf("6000c29%01x-%04x-%04x-%04x-%012x", j%16, i>>16&0xffff, i&0xffff, j, i*31+j),
				series:        s,
			})
		}
		plans = append(plans, p)
	}
	return plans
}

func datastoreOf(backing string) string {
	m := datastoreRe.FindStringSubmatch(backing)
	if m == nil {
		return ""
	}
	return m[1]
}

// renameInventory gives the model's hosts and datastores the scenario's names, before any
// client connects (the objects are plain structs in the registry at this point).
func renameInventory(model *simulator.Model, hosts, datastores []string) error {
	reg := model.Map()
	hs := reg.All("HostSystem")
	if len(hs) < len(hosts) {
		return fmt.Errorf("model has %d hosts, scenario needs %d", len(hs), len(hosts))
	}
	for i, name := range hosts {
		h := hs[i].(*simulator.HostSystem)
		h.Name = name
		h.Summary.Config.Name = name
	}
	dss := reg.All("Datastore")
	if len(dss) < len(datastores) {
		return fmt.Errorf("model has %d datastores, scenario needs %d", len(dss), len(datastores))
	}
	for i, name := range datastores {
		ds := dss[i].(*simulator.Datastore)
		ds.Name = name
		ds.Summary.Name = name
		ds.Info.GetDatastoreInfo().Name = name
	}
	return nil
}

func controllerFor(devices object.VirtualDeviceList, kind string, bus int32) (object.VirtualDeviceList, types.BaseVirtualController, error) {
	for _, d := range devices {
		switch c := d.(type) {
		case types.BaseVirtualSCSIController:
			if kind == "scsi" && c.GetVirtualSCSIController().BusNumber == bus {
				return devices, c.(types.BaseVirtualController), nil
			}
		case types.BaseVirtualSATAController:
			if kind == "sata" && c.GetVirtualSATAController().BusNumber == bus {
				return devices, c.(types.BaseVirtualController), nil
			}
		case *types.VirtualNVMEController:
			if kind == "nvme" && c.BusNumber == bus {
				return devices, c, nil
			}
		case *types.VirtualIDEController:
			if kind == "ide" && c.BusNumber == bus {
				return devices, c, nil
			}
		}
	}
	var dev types.BaseVirtualDevice
	var err error
	switch kind {
	case "scsi":
		dev, err = devices.CreateSCSIController("pvscsi")
	case "sata":
		dev, err = devices.CreateSATAController()
	case "nvme":
		dev, err = devices.CreateNVMEController()
	case "ide":
		dev, err = devices.CreateIDEController()
	}
	if err != nil {
		return nil, nil, err
	}
	ctrl := dev.(types.BaseVirtualController)
	ctrl.GetVirtualController().BusNumber = bus
	// Keys must be unique negative numbers until the server assigns real ones.
	ctrl.GetVirtualController().Key = int32(-100 - len(devices))
	devices = append(devices, dev)
	return devices, ctrl, nil
}

func vmConfigSpec(p vmPlan) (types.VirtualMachineConfigSpec, error) {
	ds := p.datastore
	if len(p.disks) > 0 {
		ds = datastoreOf(p.disks[0].backingFile)
	}
	cpus := int32(2)
	if p.vcpus > 0 {
		cpus = int32(p.vcpus)
	}
	guestID := string(types.VirtualMachineGuestOsIdentifierOtherLinux64Guest)
	if isWindows(p.guestOS) {
		guestID = string(types.VirtualMachineGuestOsIdentifierWindows2019srv_64Guest)
	}
	spec := types.VirtualMachineConfigSpec{
		Name:     p.name,
		GuestId:  guestID,
		NumCPUs:  cpus,
		MemoryMB: 4096,
		Files:    &types.VirtualMachineFileInfo{VmPathName: "[" + ds + "]"},
	}
	var devices object.VirtualDeviceList
	for i, d := range p.disks {
		m := unitRe.FindStringSubmatch(d.unit)
		bus, _ := strconv.Atoi(m[2])
		unit, _ := strconv.Atoi(m[3])
		var ctrl types.BaseVirtualController
		var err error
		devices, ctrl, err = controllerFor(devices, m[1], int32(bus))
		if err != nil {
			return spec, err
		}
		disk := &types.VirtualDisk{
			VirtualDevice: types.VirtualDevice{
				Key:           int32(-1000 - i),
				ControllerKey: ctrl.GetVirtualController().Key,
				UnitNumber:    types.NewInt32(int32(unit)),
				Backing: &types.VirtualDiskFlatVer2BackingInfo{
					DiskMode:        string(types.VirtualDiskModePersistent),
					ThinProvisioned: types.NewBool(true),
					Uuid:            d.uuid,
					VirtualDeviceFileBackingInfo: types.VirtualDeviceFileBackingInfo{
						FileName: d.backingFile,
					},
				},
			},
			CapacityInBytes: d.capacityBytes,
			CapacityInKB:    d.capacityBytes / 1024,
		}
		devices = append(devices, disk)
	}
	var err error
	spec.DeviceChange, err = devices.ConfigSpec(types.VirtualDeviceConfigSpecOperationAdd)
	if err != nil {
		return spec, err
	}
	for _, c := range spec.DeviceChange {
		if _, ok := c.GetVirtualDeviceConfigSpec().Device.(*types.VirtualDisk); ok {
			c.GetVirtualDeviceConfigSpec().FileOperation = types.VirtualDeviceConfigSpecFileOperationCreate
		}
	}
	return spec, nil
}

// createVMs creates and powers on the planned VMs through the SOAP API (as a real client would,
// so the inventory is exactly what govmomi's simulator builds), `workers` at a time, and
// registers each VM's disks with the performance manager.
func createVMs(ctx context.Context, c *vim25.Client, model *simulator.Model, perf *ScenarioPerf, plans []vmPlan, workers int) error {
	reg := model.Map()
	hostRefs := map[string]types.ManagedObjectReference{}
	for _, h := range reg.All("HostSystem") {
		hostRefs[h.Entity().Name] = h.Reference()
	}
	dc := object.NewDatacenter(c, reg.Any("Datacenter").Reference())
	folders, err := dc.Folders(ctx)
	if err != nil {
		return err
	}
	pool := object.NewResourcePool(c, reg.Any("ClusterComputeResource").(*simulator.ClusterComputeResource).ResourcePool.Reference())

	jobs := make(chan vmPlan)
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for p := range jobs {
				if err := createVM(ctx, c, folders, pool, hostRefs, perf, p); err != nil {
					errs <- err
					for range jobs {
					}
					return
				}
			}
		}()
	}
	for _, p := range plans {
		jobs <- p
	}
	close(jobs)
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
		return nil
	}
}

func createVM(ctx context.Context, c *vim25.Client, folders *object.DatacenterFolders, pool *object.ResourcePool,
	hostRefs map[string]types.ManagedObjectReference, perf *ScenarioPerf, p vmPlan) error {
	spec, err := vmConfigSpec(p)
	if err != nil {
		return fmt.Errorf("vm %s: %w", p.name, err)
	}
	hostRef, ok := hostRefs[p.host]
	if !ok {
		return fmt.Errorf("vm %s: unknown host %q", p.name, p.host)
	}
	host := object.NewHostSystem(c, hostRef)
	task, err := folders.VmFolder.CreateVM(ctx, spec, pool, host)
	if err != nil {
		return fmt.Errorf("vm %s: %w", p.name, err)
	}
	info, err := task.WaitForResult(ctx, nil)
	if err != nil {
		return fmt.Errorf("vm %s: create: %w", p.name, err)
	}
	ref := info.Result.(types.ManagedObjectReference)
	vm := object.NewVirtualMachine(c, ref)
	if task, err = vm.PowerOn(ctx); err == nil {
		_, err = task.WaitForResult(ctx, nil)
	}
	if err != nil {
		return fmt.Errorf("vm %s: power on: %w", p.name, err)
	}
	// Check that the simulator kept our identities (file name, uuid, unit).
	var mvm mo.VirtualMachine
	if err := vm.Properties(ctx, ref, []string{"config.hardware.device"}, &mvm); err != nil {
		return err
	}
	devices := object.VirtualDeviceList(mvm.Config.Hardware.Device)
	var disks []vmDisk
	for _, d := range p.disks {
		found := false
		for _, dev := range devices.SelectByType((*types.VirtualDisk)(nil)) {
			b, ok := dev.GetVirtualDevice().Backing.(*types.VirtualDiskFlatVer2BackingInfo)
			if ok && b.FileName == d.backingFile {
				inst := instanceName(devices, dev.(*types.VirtualDisk))
				if inst != d.unit || b.Uuid != d.uuid {
					return fmt.Errorf("vm %s: disk %s came out as %s uuid %s", p.name, d.unit, inst, b.Uuid)
				}
				found = true
			}
		}
		if !found {
			return fmt.Errorf("vm %s: disk %s (%s) missing after create", p.name, d.unit, d.backingFile)
		}
		disks = append(disks, vmDisk{instance: d.unit, series: d.series})
	}
	if len(disks) > 0 {
		perf.addVM(ref.Value, disks)
	}
	if p.cpu != nil {
		perf.addCPU(ref.Value, p.cpu)
	}
	return nil
}

// fixEnums fills enum properties govmomi's simulator leaves empty, which strict clients
// (pyvmomi 9) refuse to deserialize: runtime.faultToleranceState and recordReplayState.
func fixEnums(model *simulator.Model) {
	for _, e := range model.Map().All("VirtualMachine") {
		vm := e.(*simulator.VirtualMachine)
		if vm.Runtime.FaultToleranceState == "" {
			vm.Runtime.FaultToleranceState = types.VirtualMachineFaultToleranceStateNotConfigured
		}
		if vm.Runtime.RecordReplayState == "" {
			vm.Runtime.RecordReplayState = types.VirtualMachineRecordReplayStateInactive
		}
		if vm.Summary.Runtime.RecordReplayState == "" {
			vm.Summary.Runtime.RecordReplayState = types.VirtualMachineRecordReplayStateInactive
		}
		if vm.Summary.Runtime.FaultToleranceState == "" {
			vm.Summary.Runtime.FaultToleranceState = types.VirtualMachineFaultToleranceStateNotConfigured
		}
	}
}

func isWindows(guestOS string) bool {
	return strings.EqualFold(guestOS, "windows")
}

// fillGuestInfo gives each scenario VM what VMware Tools would report and govmomi's simulator
// leaves empty for a plain VM: guest.hostName (and the summary's), and guest.disk, one
// GuestDiskInfo per guest volume with its diskPath and the virtual disk backing it
// (mappings[].key = the VirtualDisk's device key, as vSphere 7+ reports it). Like fixEnums it runs
// before any client sees the VMs. Disks without a guest volume (the Linux guests' raw devices)
// are not listed, as Tools lists only mounted file systems.
func fillGuestInfo(model *simulator.Model, plans []vmPlan) {
	byName := map[string]vmPlan{}
	for _, p := range plans {
		byName[p.name] = p
	}
	for _, e := range model.Map().All("VirtualMachine") {
		vm := e.(*simulator.VirtualMachine)
		p, ok := byName[vm.Name]
		if !ok {
			continue
		}
		if vm.Guest == nil {
			vm.Guest = &types.GuestInfo{}
		}
		host := p.hostname
		if host == "" {
			host = p.name
		}
		vm.Guest.HostName = host
		vm.Guest.ToolsRunningStatus = string(types.VirtualMachineToolsRunningStatusGuestToolsRunning)
		if vm.Summary.Guest != nil {
			vm.Summary.Guest.HostName = host
		}
		if isWindows(p.guestOS) {
			vm.Guest.GuestFamily = string(types.VirtualMachineGuestOsFamilyWindowsGuest)
			vm.Guest.GuestFullName = "Microsoft Windows Server 2019 (64-bit)"
		}
		var disks []types.GuestDiskInfo
		devices := object.VirtualDeviceList(vm.Config.Hardware.Device)
		for _, d := range p.disks {
			if d.guestDiskPath == "" {
				continue
			}
			for _, dev := range devices.SelectByType((*types.VirtualDisk)(nil)) {
				b, ok := dev.GetVirtualDevice().Backing.(*types.VirtualDiskFlatVer2BackingInfo)
				if !ok || b.FileName != d.backingFile {
					continue
				}
				disks = append(disks, types.GuestDiskInfo{
					DiskPath:       d.guestDiskPath,
					Capacity:       d.capacityBytes - 1<<20,
					FreeSpace:      (d.capacityBytes - 1<<20) / 2,
					FilesystemType: "NTFS",
					Mappings:       []types.GuestInfoVirtualDiskMapping{{Key: dev.GetVirtualDevice().Key}},
				})
			}
		}
		vm.Guest.Disk = disks
	}
}

// instanceName: the performance counter instance of a disk, e.g. scsi0:1.
func instanceName(devices object.VirtualDeviceList, disk *types.VirtualDisk) string {
	ctrl := devices.FindByKey(disk.ControllerKey)
	unit := int32(-1)
	if disk.UnitNumber != nil {
		unit = *disk.UnitNumber
	}
	var kind string
	var bus int32
	switch c := ctrl.(type) {
	case types.BaseVirtualSCSIController:
		kind, bus = "scsi", c.GetVirtualSCSIController().BusNumber
	case types.BaseVirtualSATAController:
		kind, bus = "sata", c.GetVirtualSATAController().BusNumber
	case *types.VirtualNVMEController:
		kind, bus = "nvme", c.BusNumber
	case *types.VirtualIDEController:
		kind, bus = "ide", c.BusNumber
	default:
		return ""
	}
	return fmt.Sprintf("%s%d:%d", kind, bus, unit)
}
