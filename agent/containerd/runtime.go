package containerd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/containerd/v2/pkg/oci"
	"github.com/containerd/errdefs"
	"github.com/opencontainers/runtime-spec/specs-go"

	"github.com/ccattler/ccattler/agent"
)

// Labels set on every container, so that an agent restarted without etcd
// finds its containers, and what they were started from, in containerd alone.
const (
	LabelInstance  = "ccattler.instance"   // the instance id
	LabelService   = "ccattler.service"    // the service name
	LabelSpec      = "ccattler.spec"       // the agent.Spec, as JSON
	LabelStartedAt = "ccattler.started_at" // RFC 3339, set once the task runs
)

// Config says how to reach containerd and how to run containers.
type Config struct {
	Address     string        // --containerd-address: the daemon's socket
	Namespace   string        // --namespace: containerd namespace of all ccattler containers
	Snapshotter string        // default overlayfs
	Address4    string        // --advertise-address: the node address instances are reported at (host networking)
	LogDir      string        // where container stdout/stderr go, one file per instance
	ImageDir    string        // --image-dir: archives imported at start
	VolumeDir   string        // where volumes live, one directory each (the agent's --state-dir/volumes); "" runs no instance with a volume
	PullTimeout time.Duration // bound on one image pull
	Log         *slog.Logger
}

// NewConfig returns the defaults of `ccattler agent --runtime containerd`.
func NewConfig() Config {
	return Config{
		Address:     "/run/containerd/containerd.sock",
		Namespace:   "ccattler",
		Snapshotter: "overlayfs",
		PullTimeout: 5 * time.Minute,
		Log:         slog.Default(),
	}
}

// Validate names the first bad field by its flag.
func (c Config) Validate() error {
	if c.Address == "" {
		return errors.New("--containerd-address: expected the path of containerd's socket")
	}
	if c.Namespace == "" {
		return errors.New("--namespace: expected a containerd namespace such as ccattler")
	}
	if ip := net.ParseIP(c.Address4); ip == nil {
		return fmt.Errorf("--advertise-address %q: expected an IP address such as 10.0.0.5", c.Address4)
	}
	if c.ImageDir != "" {
		if fi, err := os.Stat(c.ImageDir); err != nil || !fi.IsDir() {
			return fmt.Errorf("--image-dir %s: expected a directory of image archives", c.ImageDir)
		}
	}
	return nil
}

// Runtime runs instances as containerd containers with host networking.
type Runtime struct {
	cfg Config
	c   *client.Client

	mu    sync.Mutex     // guards ports
	ports map[int]string // port -> instance holding it on this node

	usage usageCache // previous cpu readings (metrics.go)
}

var (
	_ agent.Runtime   = (*Runtime)(nil)
	_ agent.Addresser = (*Runtime)(nil)
)

// Address is --advertise-address: with host networking the node's
// instances are reached there.
func (r *Runtime) Address() string { return r.cfg.Address4 }

// New connects to containerd, checks that it answers, and imports the
// archives of ImageDir. The error names the flag to fix.
func New(ctx context.Context, cfg Config) (*Runtime, error) {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Snapshotter == "" {
		cfg.Snapshotter = "overlayfs"
	}
	if cfg.PullTimeout == 0 {
		cfg.PullTimeout = 5 * time.Minute
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if _, err := os.Stat(cfg.Address); err != nil {
		return nil, fmt.Errorf("--containerd-address %s: no containerd socket there (is containerd running?): %w", cfg.Address, err)
	}
	c, err := client.New(cfg.Address, client.WithDefaultNamespace(cfg.Namespace), client.WithTimeout(5*time.Second))
	if err != nil {
		return nil, fmt.Errorf("--containerd-address %s: %w", cfg.Address, err)
	}
	vctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := c.Version(vctx); err != nil {
		c.Close()
		return nil, fmt.Errorf("--containerd-address %s: containerd does not answer: %w", cfg.Address, err)
	}
	if cfg.LogDir != "" {
		if err := os.MkdirAll(cfg.LogDir, 0o700); err != nil {
			c.Close()
			return nil, fmt.Errorf("container log dir %s: %w", cfg.LogDir, err)
		}
	}
	r := &Runtime{cfg: cfg, c: c, ports: map[int]string{}}
	if cfg.ImageDir != "" {
		r.importDir(ctx, cfg.ImageDir)
	}
	return r, nil
}

// Start resolves the image (imported, or pulled), checks the ports, creates
// the container with the spec's limits and starts its task.
func (r *Runtime) Start(ctx context.Context, sp agent.Spec) (agent.Status, error) {
	img, err := r.image(ctx, sp.Image)
	if err != nil {
		return agent.Status{}, err
	}
	if err := r.reservePorts(sp); err != nil {
		return agent.Status{}, err
	}
	ok := false
	defer func() {
		if !ok {
			r.releasePorts(sp.ID)
		}
	}()
	specJSON, err := json.Marshal(sp)
	if err != nil {
		return agent.Status{}, fmt.Errorf("encode spec of %s: %w", sp.ID, err)
	}
	opts := []oci.SpecOpts{
		oci.WithImageConfig(img),
		// Host networking: the instance is reached at the node's address on
		// its exposed ports (see doc.go for why).
		oci.WithHostNamespace(specs.NetworkNamespace),
		oci.WithHostHostsFile,
		oci.WithHostResolvconf,
	}
	switch {
	case len(sp.Command) > 0:
		opts = append(opts, oci.WithProcessArgs(append(slices.Clone(sp.Command), sp.Args...)...))
	case len(sp.Args) > 0:
		opts = append(opts, oci.WithImageConfigArgs(img, sp.Args))
	}
	var env []string
	for _, k := range slices.Sorted(maps.Keys(sp.Env)) {
		env = append(env, k+"="+sp.Env[k])
	}
	if len(sp.Ports) > 0 {
		env = append(env, "PORT="+strconv.Itoa(sp.Ports[0])) // last: the port is the agent's to say
	}
	if len(env) > 0 {
		opts = append(opts, oci.WithEnv(env))
	}
	if sp.Memory > 0 {
		opts = append(opts, oci.WithMemoryLimit(uint64(sp.Memory)))
	}
	if sp.CPU > 0 {
		const period = 100000 // µs: the CFS default
		opts = append(opts, oci.WithCPUCFS(int64(sp.CPU*period), period))
	}
	if sp.Volume != "" {
		m, err := r.volumeMount(sp.Volume)
		if err != nil {
			return agent.Status{}, err
		}
		opts = append(opts, oci.WithMounts([]specs.Mount{m}))
	}
	labels := map[string]string{}
	for k, v := range sp.Labels {
		labels[k] = v
	}
	// The runtime's own labels win: an instance cannot pass for another.
	labels[LabelInstance], labels[LabelService], labels[LabelSpec] = sp.ID, sp.Service, string(specJSON)
	ctr, err := r.c.NewContainer(ctx, sp.ID,
		client.WithImage(img),
		client.WithSnapshotter(r.cfg.Snapshotter),
		client.WithNewSnapshot(sp.ID+"-rootfs", img),
		client.WithNewSpec(opts...),
		client.WithContainerLabels(labels),
	)
	if err != nil {
		return agent.Status{}, fmt.Errorf("create container %s: %w", sp.ID, err)
	}
	cleanup := func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if t, err := ctr.Task(dctx, nil); err == nil {
			_, _ = t.Delete(dctx, client.WithProcessKill)
		}
		_ = ctr.Delete(dctx, client.WithSnapshotCleanup)
	}
	creator := cio.NullIO
	if r.cfg.LogDir != "" {
		creator = cio.LogFile(filepath.Join(r.cfg.LogDir, sp.ID+".log"))
	}
	task, err := ctr.NewTask(ctx, creator)
	if err != nil {
		cleanup()
		return agent.Status{}, fmt.Errorf("create task of %s: %w", sp.ID, err)
	}
	if err := task.Start(ctx); err != nil {
		cleanup()
		return agent.Status{}, fmt.Errorf("start task of %s: %w", sp.ID, err)
	}
	started := time.Now().UTC()
	if _, err := ctr.SetLabels(ctx, map[string]string{LabelStartedAt: started.Format(time.RFC3339Nano)}); err != nil {
		r.cfg.Log.Warn("record start time in container label", "instance", sp.ID, "err", err)
	}
	ok = true
	return agent.Status{Spec: sp, Image: sp.Image, IP: r.cfg.Address4, Running: true, StartedAt: started}, nil
}

// reservePorts checks that the spec's ports are free on the host and not
// claimed by another instance of this node.
func (r *Runtime) reservePorts(sp agent.Spec) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range sp.Ports {
		if other, ok := r.ports[p]; ok && other != sp.ID {
			return fmt.Errorf("port %d is already used by instance %s on this node (host networking)", p, other)
		}
		l, err := net.Listen("tcp", ":"+strconv.Itoa(p))
		if err != nil {
			return fmt.Errorf("port %d is not free on this node (host networking): %w", p, err)
		}
		l.Close()
	}
	for _, p := range sp.Ports {
		r.ports[p] = sp.ID
	}
	return nil
}

func (r *Runtime) releasePorts(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for p, holder := range r.ports {
		if holder == id {
			delete(r.ports, p)
		}
	}
}

// Stop sends SIGTERM, waits up to grace for the task to exit, then SIGKILL,
// and removes task, container and snapshot.
func (r *Runtime) Stop(ctx context.Context, id string, grace time.Duration) error {
	ctr, err := r.c.LoadContainer(ctx, id)
	if errdefs.IsNotFound(err) {
		r.releasePorts(id)
		return nil
	}
	if err != nil {
		return fmt.Errorf("load container %s: %w", id, err)
	}
	task, err := ctr.Task(ctx, nil)
	switch {
	case errdefs.IsNotFound(err):
	case err != nil:
		return fmt.Errorf("task of %s: %w", id, err)
	default:
		st, err := task.Status(ctx)
		if err != nil {
			return fmt.Errorf("status of %s: %w", id, err)
		}
		if st.Status != client.Stopped {
			exited, err := task.Wait(ctx)
			if err != nil {
				return fmt.Errorf("wait for %s: %w", id, err)
			}
			if err := task.Kill(ctx, syscall.SIGTERM); err != nil && !errdefs.IsNotFound(err) {
				return fmt.Errorf("SIGTERM %s: %w", id, err)
			}
			t := time.NewTimer(grace)
			select {
			case <-exited:
				t.Stop()
			case <-t.C:
				r.cfg.Log.Info("instance ignored SIGTERM; sending SIGKILL", "instance", id, "grace", grace)
				if err := task.Kill(ctx, syscall.SIGKILL, client.WithKillAll); err != nil && !errdefs.IsNotFound(err) {
					return fmt.Errorf("SIGKILL %s: %w", id, err)
				}
				select {
				case <-exited:
				case <-time.After(30 * time.Second):
					return fmt.Errorf("%s did not exit 30s after SIGKILL", id)
				case <-ctx.Done():
					return ctx.Err()
				}
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			}
		}
		if _, err := task.Delete(ctx); err != nil && !errdefs.IsNotFound(err) {
			return fmt.Errorf("delete task of %s: %w", id, err)
		}
	}
	if err := ctr.Delete(ctx, client.WithSnapshotCleanup); err != nil && !errdefs.IsNotFound(err) {
		return fmt.Errorf("delete container %s: %w", id, err)
	}
	r.releasePorts(id)
	return nil
}

// List returns every container labelled with an instance id in the namespace.
func (r *Runtime) List(ctx context.Context) ([]agent.Status, error) {
	ctrs, err := r.c.Containers(ctx, fmt.Sprintf("labels.%q", LabelInstance))
	if err != nil {
		return nil, fmt.Errorf("list containers: %w", err)
	}
	out := make([]agent.Status, 0, len(ctrs))
	for _, ctr := range ctrs {
		info, err := ctr.Info(ctx, client.WithoutRefreshedMetadata)
		if errdefs.IsNotFound(err) {
			continue // removed meanwhile
		}
		if err != nil {
			return nil, fmt.Errorf("container %s: %w", ctr.ID(), err)
		}
		st := agent.Status{IP: r.cfg.Address4}
		if err := json.Unmarshal([]byte(info.Labels[LabelSpec]), &st.Spec); err != nil || st.Spec.ID == "" {
			st.Spec = agent.Spec{ID: info.Labels[LabelInstance], Service: info.Labels[LabelService]}
		}
		st.Image = st.Spec.Image
		st.StartedAt, _ = time.Parse(time.RFC3339Nano, info.Labels[LabelStartedAt])
		task, err := ctr.Task(ctx, nil)
		switch {
		case errdefs.IsNotFound(err):
			st.ExitStatus, st.ExitReason = client.UnknownExitStatus, "its task is gone (containerd or the host restarted)"
		case err != nil:
			return nil, fmt.Errorf("task of %s: %w", ctr.ID(), err)
		default:
			ps, err := task.Status(ctx)
			if err != nil {
				return nil, fmt.Errorf("status of %s: %w", ctr.ID(), err)
			}
			switch ps.Status {
			case client.Running, client.Paused, client.Pausing:
				st.Running = true
			case client.Created:
				st.Running = true // a start is in progress
			default:
				st.ExitStatus = ps.ExitStatus
				st.ExitReason = fmt.Sprintf("process exited with status %d at %s", ps.ExitStatus, ps.ExitTime.UTC().Format(time.RFC3339))
			}
		}
		if st.Running {
			r.mu.Lock()
			for _, p := range st.Spec.Ports {
				r.ports[p] = st.Spec.ID
			}
			r.mu.Unlock()
		}
		out = append(out, st)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Spec.ID < out[j].Spec.ID })
	return out, nil
}

var _ agent.Logged = (*Runtime)(nil)

// OpenLog opens what instance id wrote to stdout and stderr, from
// LogDir/<id>.log (kept until the agent's state dir is cleaned).
func (r *Runtime) OpenLog(id string) (io.ReadCloser, error) {
	if r.cfg.LogDir == "" {
		return nil, fmt.Errorf("instance %s: container output is not kept (no log dir): %w", id, os.ErrNotExist)
	}
	return os.Open(filepath.Join(r.cfg.LogDir, id+".log"))
}

// Close closes the connection to containerd; containers keep running.
func (r *Runtime) Close() error { return r.c.Close() }
