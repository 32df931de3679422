// Package faults is the fault suite of the control plane: its tests run the
// real ccattler binary as separate processes (three secure servers forming
// one etcd cluster with --initial-cluster, simulated agents), inject faults
// by killing (SIGKILL) and freezing (SIGSTOP) processes and by cutting
// the network of processes run in network namespaces the tests create
// (loopback only, bridged port by port: netns_test.go), record what the
// clients saw, and check it by machine: acknowledged applies for
// linearizability (porcupine), instance counts, ids and endpoints against
// the invariants after every fault.
//
//	go test ./faults/...          # scaled to run in CI
//	go test ./faults/... -long    # full length and size
//
// A failing run keeps its directory (servers' logs, data, the history)
// and names it in the test's output.
package faults
