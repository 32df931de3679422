// Package containerd is the real runtime of the node agent: instances run as
// containerd containers (github.com/containerd/containerd/v2 client against
// a containerd daemon with runc; containerd 1.6 and later).
//
//	rt, err := containerd.New(ctx, containerd.Config{Address: "/run/containerd/containerd.sock",
//		Namespace: "ccattler", Address4: "10.0.0.5", ImageDir: "/var/lib/ccattler/images"})
//	// then agent.NodeConfig{..., Runtime: rt}
//
// What it does:
//
//   - Its own containerd namespace (default "ccattler"), so ccattler's
//     containers never mix with anyone else's.
//   - Every container is named after its instance id and labelled
//     ccattler.instance, ccattler.service, ccattler.spec (the agent.Spec as
//     JSON) and ccattler.started_at, so an agent restarted without etcd or
//     without its cache finds its containers, their spec and their start
//     time again in containerd alone.
//   - Cpu and memory limits from the service's resources: a CFS quota of
//     cpu × 100 ms per 100 ms, and a memory limit, in the container's cgroup
//     (/sys/fs/cgroup/<controller>/<namespace>/<id> on cgroup v1,
//     /sys/fs/cgroup/<namespace>/<id> on v2).
//   - Images: pulled from their registry on first use, or imported from
//     archives (OCI layout or docker save, .tar or .tar.gz): New imports
//     every archive of Config.ImageDir (--image-dir) at start, for machines
//     without a registry. Names come from the manifest's
//     io.containerd.image.name or org.opencontainers.image.ref.name
//     annotation; a service's "nginx:1.28" is docker.io/library/nginx:1.28.
//   - Stop is SIGTERM, then SIGKILL after the grace period, then removal of
//     the task, the container and its snapshot.
//   - An exited task is left in place and listed as not running, with its
//     exit status: the agent reports it failed and never restarts it.
//
// Networking: host networking with a port check. Containers share the
// node's network namespace; an instance is reported at the node's address
// (--advertise-address) and listens on its service's exposed port, which
// the runtime passes in the PORT environment variable. Before a start the
// runtime checks that every exposed port is free on the host and not held
// by another instance of the node; if not, the instance fails with the port
// named. Why host networking rather than a network namespace per instance
// on a bridge (CNI): it needs no CNI plugins, no bridge, no iptables rules
// and no address management on the node, works the same on every machine
// containerd runs on, and the address it reports is reachable from other
// nodes without an overlay. The cost: two instances exposing the same port
// cannot share a node (the agent reports network = "host", so the
// scheduler's port filter places the second elsewhere, and one that gets
// here anyway fails with the port named), and instances are not isolated
// from each other on the network.
//
// Command, args and env: a service's command replaces the image's
// entrypoint, its args the image's arguments, its env is added to the
// image's environment ($PORT last); its labels are set on the container
// under ccattler's own. Output goes to LogDir/<id>.log (OpenLog), which the
// agent's LogServer serves for `ccattler logs`. Pack writes an image archive
// of static files for machines without a registry (`ccattler image pack`).
package containerd
