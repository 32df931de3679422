package faults

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// regInput is one client operation on a service's instance count: an
// apply that writes it, or a linearizable read of it.
type regInput struct {
	Service string `json:"service"`
	Write   bool   `json:"write"`
	Value   int    `json:"value,omitempty"`
}

// regOutput is what a read returned (0: no such key).
type regOutput struct {
	Value int `json:"value"`
}

// registers is the sequential specification: each service's
// intent/user/service/{name}/instances is a register.
var registers = porcupine.Model{
	Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
		by := map[string][]porcupine.Operation{}
		for _, op := range h {
			s := op.Input.(regInput).Service
			by[s] = append(by[s], op)
		}
		var out [][]porcupine.Operation
		for _, ops := range by {
			out = append(out, ops)
		}
		return out
	},
	Init: func() any { return 0 },
	Step: func(state, input, output any) (bool, any) {
		in := input.(regInput)
		if in.Write {
			return true, in.Value
		}
		return output.(regOutput).Value == state.(int), state
	},
	DescribeOperation: func(input, output any) string {
		in := input.(regInput)
		if in.Write {
			return fmt.Sprintf("apply %s=%d", in.Service, in.Value)
		}
		return fmt.Sprintf("read %s -> %d", in.Service, output.(regOutput).Value)
	},
}

// TestEtcdLeaderKillsUnderApplies kills etcd's leader again and again (and
// starts it again) while clients apply and read instance counts. Every
// acknowledged apply must be linearizable with every read; an apply that
// failed may or may not have been made, so it may take effect at any time
// after it was sent. Afterwards the instances converge to what was last
// applied.
func TestEtcdLeaderKillsUnderApplies(t *testing.T) {
	c := newCluster(t)
	c.startAgents(1, 4)
	kills, clients := scale(4, 11), 3
	services := []string{"lin-0", "lin-1", "lin-2"}

	var mu sync.Mutex
	var history []porcupine.Operation
	acked, failed := 0, 0
	start := time.Now()
	now := func() int64 { return int64(time.Since(start)) }
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for cl := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(cl), 1))
			file := filepath.Join(c.dir, fmt.Sprintf("client-%d.hcl", cl))
			for {
				select {
				case <-stop:
					return
				default:
				}
				svc := services[rng.IntN(len(services))]
				op := porcupine.Operation{ClientId: cl}
				if rng.IntN(2) == 0 {
					v := 1 + rng.IntN(6)
					src := fmt.Sprintf("service %q {\n  image = \"nginx\"\n  instances = %d\n  expose = [8080]\n  resources { cpu = 0.01  memory = \"1Mi\" }\n}\n", svc, v)
					if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
						t.Error(err)
						return
					}
					op.Input, op.Output = regInput{Service: svc, Write: true, Value: v}, regOutput{}
					op.Call = now()
					r := c.client("--timeout", "5s", "apply", "-f", file)
					op.Return = now()
					mu.Lock()
					if r.code != 0 {
						op.Return = math.MaxInt64 // made or not: it may take effect any time later
						failed++
					} else {
						acked++
					}
					history = append(history, op)
					mu.Unlock()
					continue
				}
				op.Input = regInput{Service: svc}
				op.Call = now()
				r := c.client("--timeout", "5s", "facts", "get", "intent/user/service/"+svc+"/instances", "-o", "json")
				op.Return = now()
				if r.code != 0 {
					continue // a read that failed says nothing
				}
				var fj struct {
					Facts []struct {
						Value int `json:"value"`
					} `json:"facts"`
				}
				if err := json.Unmarshal([]byte(r.stdout), &fj); err != nil {
					t.Errorf("facts get -o json: %v\n%s", err, r.stdout)
					return
				}
				out := regOutput{}
				if len(fj.Facts) == 1 {
					out.Value = fj.Facts[0].Value
				}
				op.Output = out
				mu.Lock()
				history = append(history, op)
				mu.Unlock()
			}
		}()
	}

	var elections []time.Duration
	for k := range kills {
		time.Sleep(scale(3*time.Second, 5*time.Second))
		leader, ok := c.etcdLeader()
		if !ok {
			t.Fatalf("kill %d: no etcd leader to kill", k+1)
		}
		killed := time.Now()
		leader.kill()
		c.poll("a new etcd leader", 30*time.Second, func() (bool, string) {
			m, ok := c.etcdLeader()
			return ok && m != leader, "none yet"
		})
		elections = append(elections, time.Since(killed))
		c.restart(leader)
	}
	time.Sleep(2 * time.Second)
	close(stop)
	wg.Wait()
	t.Logf("%d etcd leader kills; new leader elected after %v; %d applies acknowledged, %d failed, %d operations in all",
		kills, roundAll(elections), acked, failed, len(history))
	if acked == 0 {
		t.Fatal("no apply was acknowledged: the run checked nothing")
	}

	raw, _ := json.MarshalIndent(history, "", " ")
	_ = os.WriteFile(filepath.Join(c.dir, "history.json"), raw, 0o644)
	res, info := porcupine.CheckOperationsVerbose(registers, history, time.Minute)
	switch res {
	case porcupine.Illegal:
		viz := filepath.Join(c.dir, "linearizability.html")
		_ = porcupine.VisualizePath(registers, info, viz)
		t.Fatalf("the history of applies and reads is not linearizable: see %s", viz)
	case porcupine.Unknown:
		t.Fatalf("the linearizability check did not finish within a minute (%d operations)", len(history))
	}

	// What the instances converge to is the last value of each register.
	want := map[string]int{}
	for _, s := range services {
		r := c.must("facts", "get", "intent/user/service/"+s+"/instances", "-o", "json")
		var fj struct {
			Facts []struct {
				Value int `json:"value"`
			} `json:"facts"`
		}
		if err := json.Unmarshal([]byte(r), &fj); err != nil || len(fj.Facts) != 1 {
			continue // never applied
		}
		want[s] = fj.Facts[0].Value
	}
	_, took := c.waitConverged(want, 2*time.Minute)
	t.Logf("converged to the last applied counts %v within %s of the clients stopping", want, took.Round(time.Millisecond))
	c.allRunning()
}

func roundAll(ds []time.Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = d.Round(time.Millisecond)
	}
	return out
}

// TestRegistersModel shows the check is not vacuous: a read that returns
// an overwritten value after the overwrite was acknowledged is rejected,
// and a failed apply may take effect late.
func TestRegistersModel(t *testing.T) {
	w := func(v int, call, ret int64) porcupine.Operation {
		return porcupine.Operation{Input: regInput{Service: "s", Write: true, Value: v}, Output: regOutput{}, Call: call, Return: ret}
	}
	r := func(v int, call, ret int64) porcupine.Operation {
		return porcupine.Operation{Input: regInput{Service: "s"}, Output: regOutput{Value: v}, Call: call, Return: ret}
	}
	if porcupine.CheckOperations(registers, []porcupine.Operation{w(1, 0, 1), w(2, 2, 3), r(1, 4, 5)}) {
		t.Error("a stale read after an acknowledged overwrite was accepted")
	}
	if !porcupine.CheckOperations(registers, []porcupine.Operation{w(1, 0, 1), w(2, 2, math.MaxInt64), r(1, 4, 5), r(2, 6, 7)}) {
		t.Error("a failed apply taking effect late was rejected")
	}
}
