// vcsim-scenario: a vCenter simulator whose performance counters come from an ioparallax scenario.
//
// It runs govmomi's simulator (real SOAP stack, inventory, sessions, PropertyCollector) and
// replaces the PerformanceManager's QueryPerf and QueryAvailablePerfMetric: per-disk, per-second
// ground truth in (`ioparallax-scenario compile <name> -o trace.json`), the samples a vCenter
// would compute out (see perf.go).
package main

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"log"
	"net/url"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/vmware/govmomi"
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/types"
)

func main() {
	traceFlag := flag.String("trace", "", "per-second trace JSON from `ioparallax-scenario compile` (optional with -vms)")
	listen := flag.String("listen", "127.0.0.1:0", "listen address; port 0 picks a free port (printed on stdout)")
	vms := flag.Int("vms", 0, "extra synthetic VMs with a steady generated workload")
	disksPerVM := flag.Int("disks-per-vm", 2, "virtual disks per synthetic VM")
	hosts := flag.Int("hosts", 3, "hosts in the cluster (at least as many as the scenario names)")
	user := flag.String("username", "", "login user name (empty: any user name and password are accepted)")
	pass := flag.String("password", "", "login password")
	sessionTimeout := flag.Duration("session-timeout", 0, "idle session timeout (0: the simulator's default, no expiry)")
	methodDelay := flag.String("method-delay", "", "delay per SOAP method, 'QueryPerf:3000,RetrieveProperties:500' (milliseconds)")
	delay := flag.Int("delay", 0, "delay in milliseconds for every SOAP method")
	clockOffset := flag.Duration("clock-offset", 0, "shift the simulator's clock (e.g. -1h)")
	freezeAt := flag.Int64("freeze-at", 0, "freeze the simulator's clock at this epoch second (0: real time)")
	clockSpeed := flag.Float64("clock-speed", 1, "simulated seconds per real second (20: a new 20 s sample every second)")
	maxQueryMetrics := flag.Int("max-query-metrics", 256, "config.vpxd.stats.maxQueryMetrics: metrics per QueryPerf (0: unlimited)")
	useTLS := flag.Bool("tls", true, "serve https with a self-signed certificate")
	workers := flag.Int("workers", 8, "parallel VM creations at start-up")
	controlListen := flag.String("control-listen", "", "serve the test control interface (plain HTTP, e.g. 127.0.0.1:0; printed as 'control <url>'): "+
		"POST /sessions/expire, /queryperf/hold, /queryperf/release, /clock/advance?seconds=N; GET /queryperf/held (empty: off)")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "Usage: %s -trace trace.json [-listen 127.0.0.1:0] [flags]\n\n"+
			"A vCenter simulator (govmomi) whose virtualDisk performance counters are computed from an\n"+
			"ioparallax scenario trace: 20 s realtime samples and 300 s+ roll-ups, aligned ascending\n"+
			"timestamps, '*' expanded to the VM's disks, zeros kept. Prints 'listening <url>' when ready.\n\n", os.Args[0])
		flag.PrintDefaults()
	}
	flag.Parse()
	log.SetFlags(log.LstdFlags | log.LUTC)

	if *traceFlag == "" && *vms == 0 {
		log.Fatal("nothing to simulate: give -trace and/or -vms")
	}

	started := time.Now()
	clock := func() time.Time {
		now := time.Now()
		if *clockSpeed != 1 {
			now = started.Add(time.Duration(float64(now.Sub(started)) * *clockSpeed))
		}
		return now.Add(*clockOffset)
	}
	if *freezeAt != 0 {
		frozen := time.Unix(*freezeAt, 0)
		clock = func() time.Time { return frozen }
	}
	ctl := newControl()
	clock = ctl.clock.wrap(clock)

	var plans []vmPlan
	var hostNames []string
	var datastores []string
	seenHost := map[string]bool{}
	seenDS := map[string]bool{}
	var trace *traceFile // hosts' hardware and CPU (cpu.go)
	if *traceFlag != "" {
		t, err := loadTrace(*traceFlag)
		if err != nil {
			log.Fatal(err)
		}
		trace = t
		plans, err = plansFromTrace(t)
		if err != nil {
			log.Fatalf("%s: %v", *traceFlag, err)
		}
		for _, p := range plans {
			if !seenHost[p.host] {
				seenHost[p.host] = true
				hostNames = append(hostNames, p.host)
			}
			for _, d := range p.disks {
				if ds := datastoreOf(d.backingFile); !seenDS[ds] {
					seenDS[ds] = true
					datastores = append(datastores, ds)
				}
			}
		}
	}
	sort.Strings(hostNames)
	for i := 1; len(hostNames) < *hosts; i++ {
		if name := fmt.Sprintf("esx-%02d", i); !seenHost[name] {
			seenHost[name] = true
			hostNames = append(hostNames, name)
		}
	}
	if len(datastores) == 0 {
		datastores = []string{"ctr01"}
	}
	if *vms > 0 {
		plans = append(plans, syntheticPlans(*vms, *disksPerVM, datastores[0], hostNames)...)
	}

	model := simulator.VPX()
	model.Host = 0
	model.Cluster = 1
	model.ClusterHost = len(hostNames)
	model.Machine = 0
	model.Datastore = len(datastores)
	model.Autostart = false
	// vSphere 8.0U3's API, not vcsim's default 6.5: a client negotiates the newest version both
	// know, and guest.disk's filesystemType and mappings (the guest-to-VM disk join) are 7.0 fields
	// a 6.5 session cannot carry (pyvmomi cannot even read them).
	model.ServiceContent.About.ApiVersion = "8.0.3.0"
	model.ServiceContent.About.Version = "8.0.3"
	if err := model.Create(); err != nil {
		log.Fatal(err)
	}
	defer model.Remove()
	if err := renameInventory(model, hostNames, datastores); err != nil {
		log.Fatal(err)
	}

	options := []types.BaseOptionValue{
		&types.OptionValue{Key: "config.vpxd.stats.maxQueryMetrics", Value: strconv.Itoa(*maxQueryMetrics)},
	}
	if *sessionTimeout > 0 {
		options = append(options, &types.OptionValue{Key: "config.vmacore.soap.sessionTimeout", Value: sessionTimeout.String()})
	}
	model.Map().OptionManager().UpdateOptions(&types.UpdateOptions{ChangedValue: options})

	pm := model.Map().Get(*model.ServiceContent.PerfManager).(*simulator.PerformanceManager)
	perf := newScenarioPerf(pm, clock, *maxQueryMetrics)
	perf.gate = ctl.perf
	model.Map().Put(perf)
	addHostCPU(model, perf, trace)

	u := &url.URL{Host: *listen}
	loginUser := url.UserPassword("user", "pass")
	if *user != "" {
		u.User = url.UserPassword(*user, *pass)
		loginUser = u.User
	}
	model.Service.Listen = u
	if *useTLS {
		model.Service.TLS = new(tls.Config)
	}
	server := model.Service.NewServer()
	defer server.Close()

	start := time.Now()
	ctx := context.Background()
	clientURL := *server.URL
	clientURL.User = loginUser
	client, err := govmomi.NewClient(ctx, &clientURL, true)
	if err != nil {
		log.Fatalf("connecting to ourselves: %v", err)
	}
	if err := createVMs(ctx, client.Client, model, perf, plans, *workers); err != nil {
		log.Fatal(err)
	}
	_ = client.Logout(ctx)
	fixEnums(model)
	fillGuestInfo(model, plans)
	markServiceVMs(model, plans)
	log.Printf("created %d VMs on %d hosts in %.1fs", len(plans), len(hostNames), time.Since(start).Seconds())

	// Delays apply to clients only, not to building the inventory.
	if *methodDelay != "" {
		m := map[string]int{}
		for _, item := range strings.Split(*methodDelay, ",") {
			name, ms, ok := strings.Cut(strings.TrimSpace(item), ":")
			n, err := strconv.Atoi(ms)
			if !ok || err != nil {
				log.Fatalf("-method-delay: expected method:milliseconds, got %q", item)
			}
			m[name] = n
		}
		model.DelayConfig.MethodDelay = m
	}
	model.DelayConfig.Delay = *delay

	if *controlListen != "" {
		model.Map().Cookie = ctl.sessions.cookie
		ctl.sm = model.Map().SessionManager
		addr, err := ctl.serve(*controlListen)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("control http://%s\n", addr)
	}

	public := *server.URL
	public.User = nil
	fmt.Printf("listening %s\n", public.String())
	os.Stdout.Sync()

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	<-sig
	ctl.perf.release() // closing the server waits for the requests in progress
}
