package main

// The control interface (-control-listen): what a test does to the simulated vCenter at the
// moment it chooses, instead of waiting for a timer to fire on a machine whose speed it does not
// know. A plain-HTTP listener of its own (loopback), so the vCenter port serves nothing a real
// vCenter does not:
//
//	POST /sessions/expire        every session in use ends now, as an idle timeout ends it
//	POST /queryperf/hold         QueryPerf calls from now on wait (a vCenter that does not answer)
//	POST /queryperf/release      the held calls and every later one answer
//	GET  /queryperf/held         how many QueryPerf calls are waiting now
//	POST /clock/advance?seconds=N  the simulator's clock moves N seconds forward (new samples)
//
// Each answers one line of text once the change is made, so a test that waits for the answer
// knows the simulator is in the new state.

import (
	"fmt"
	"log"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/types"
)

// gate holds calls while closed; release lets the held ones and every later one through.
type gate struct {
	mu      sync.Mutex
	closed  chan struct{} // nil while open
	waiting int
}

func (g *gate) hold() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed == nil {
		g.closed = make(chan struct{})
	}
}

func (g *gate) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed != nil {
		close(g.closed)
		g.closed = nil
	}
}

// pass returns at once while the gate is open, or when it is released.
func (g *gate) pass() {
	g.mu.Lock()
	ch := g.closed
	if ch != nil {
		g.waiting++
	}
	g.mu.Unlock()
	if ch == nil {
		return
	}
	<-ch
	g.mu.Lock()
	g.waiting--
	g.mu.Unlock()
}

func (g *gate) held() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.waiting
}

// sessionTracker records the session keys clients present, so that they can be ended on command
// (govmomi's simulator keeps its sessions private; TerminateSession ends one by key).
type sessionTracker struct {
	mu   sync.Mutex
	keys map[string]bool
}

// cookie is the registry's Cookie hook: the session cookie of the request, as by default,
// recorded on the way.
func (t *sessionTracker) cookie(ctx *simulator.Context) string {
	key := simulator.HTTPCookie(ctx)
	if key != "" {
		t.mu.Lock()
		t.keys[key] = true
		t.mu.Unlock()
	}
	return key
}

// expire ends every session seen so far that still exists; it returns how many it ended.
func (t *sessionTracker) expire(sm *simulator.SessionManager) int {
	t.mu.Lock()
	keys := t.keys
	t.keys = map[string]bool{}
	t.mu.Unlock()
	// TerminateSession refuses to end the caller's own session: the caller here has none.
	caller := &simulator.Context{Session: &simulator.Session{}}
	n := 0
	for key := range keys {
		if res := sm.TerminateSession(caller, &types.TerminateSession{SessionId: []string{key}}); res.Fault() == nil {
			n++ // a key whose session was logged out already answers NotFound
		}
	}
	return n
}

// clockControl is the offset the test has moved the simulator's clock by.
type clockControl struct{ offset atomic.Int64 } // nanoseconds

func (c *clockControl) wrap(clock func() time.Time) func() time.Time {
	return func() time.Time { return clock().Add(time.Duration(c.offset.Load())) }
}

type control struct {
	sessions *sessionTracker
	perf     *gate
	clock    *clockControl
	sm       func() *simulator.SessionManager
}

func newControl() *control {
	return &control{sessions: &sessionTracker{keys: map[string]bool{}}, perf: &gate{}, clock: &clockControl{}}
}

func (c *control) handler() http.Handler {
	mux := http.NewServeMux()
	post := func(path string, f func(w http.ResponseWriter, r *http.Request)) {
		mux.HandleFunc("POST "+path, f)
	}
	post("/sessions/expire", func(w http.ResponseWriter, _ *http.Request) {
		n := c.sessions.expire(c.sm())
		log.Printf("control: %d sessions expired", n)
		fmt.Fprintf(w, "expired %d\n", n)
	})
	post("/queryperf/hold", func(w http.ResponseWriter, _ *http.Request) {
		c.perf.hold()
		fmt.Fprintln(w, "holding QueryPerf")
	})
	post("/queryperf/release", func(w http.ResponseWriter, _ *http.Request) {
		c.perf.release()
		fmt.Fprintln(w, "released QueryPerf")
	})
	mux.HandleFunc("GET /queryperf/held", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, "%d\n", c.perf.held())
	})
	post("/clock/advance", func(w http.ResponseWriter, r *http.Request) {
		s, err := strconv.ParseFloat(r.URL.Query().Get("seconds"), 64)
		if err != nil {
			http.Error(w, "seconds: a number of seconds is needed", http.StatusBadRequest)
			return
		}
		total := c.clock.offset.Add(int64(s * float64(time.Second)))
		fmt.Fprintf(w, "clock offset %s\n", time.Duration(total))
	})
	return mux
}

// serve starts the control listener; it returns the address it listens on.
func (c *control) serve(addr string) (string, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("-control-listen: %w", err)
	}
	go func() { _ = http.Serve(ln, c.handler()) }()
	return ln.Addr().String(), nil
}
