package containerd

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/errdefs"

	"github.com/ccattler/ccattler/agent"
)

// usageCache holds the previous cpu reading of each container: usage is the
// cpu time its cgroup accumulated between two readings over the wall time
// between them.
type usageCache struct {
	mu   sync.Mutex
	last map[string]cpuReading // instance id -> previous reading
}

type cpuReading struct {
	used time.Duration // cpu time the cgroup has used in total
	at   time.Time
}

var _ agent.Metered = (*Runtime)(nil)

// Usage measures every running container of the namespace from its task's
// cgroup (cgroup v1 cpuacct.usage, or v2 cpu.stat usage_usec): cores used on
// average since the previous call. A container seen for the first time has no
// rate yet and is left out until the next call.
func (r *Runtime) Usage(ctx context.Context) ([]agent.Usage, error) {
	ctrs, err := r.c.Containers(ctx, fmt.Sprintf("labels.%q", LabelInstance))
	if err != nil {
		return nil, fmt.Errorf("list containers: %w", err)
	}
	now := time.Now()
	seen := map[string]cpuReading{}
	var out []agent.Usage
	r.usage.mu.Lock()
	defer r.usage.mu.Unlock()
	for _, ctr := range ctrs {
		info, err := ctr.Info(ctx, client.WithoutRefreshedMetadata)
		if err != nil {
			continue // removed meanwhile
		}
		task, err := ctr.Task(ctx, nil)
		if err != nil {
			continue // no task: nothing runs
		}
		if st, err := task.Status(ctx); err != nil || st.Status != client.Running {
			continue
		}
		spec, err := ctr.Spec(ctx)
		if err != nil || spec.Linux == nil || spec.Linux.CgroupsPath == "" {
			continue
		}
		used, err := cgroupCPU(spec.Linux.CgroupsPath)
		if err != nil {
			r.cfg.Log.Debug("read container cpu use", "container", ctr.ID(), "err", err)
			continue
		}
		id := info.Labels[LabelInstance]
		cur := cpuReading{used: used, at: now}
		seen[id] = cur
		if prev, ok := r.usage.last[id]; ok && now.After(prev.at) && used >= prev.used {
			out = append(out, agent.Usage{ID: id, Service: info.Labels[LabelService],
				CPU: (used - prev.used).Seconds() / now.Sub(prev.at).Seconds()})
		}
	}
	r.usage.last = seen // forget containers that are gone
	return out, nil
}

// cgroupCPU returns the cpu time the cgroup at path (relative to the cgroup
// root, as the OCI spec names it) has used, from the cgroup v1 cpuacct
// controller or the v2 unified hierarchy, whichever the host mounts.
func cgroupCPU(path string) (time.Duration, error) {
	for _, dir := range []string{"cpuacct", "cpu,cpuacct", "cpuacct,cpu"} {
		b, err := os.ReadFile(filepath.Join("/sys/fs/cgroup", dir, path, "cpuacct.usage"))
		if err == nil {
			ns, err := strconv.ParseInt(string(bytes.TrimSpace(b)), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("cpuacct.usage of %s: %w", path, err)
			}
			return time.Duration(ns), nil
		}
	}
	for _, root := range []string{"/sys/fs/cgroup", "/sys/fs/cgroup/unified"} {
		f, err := os.Open(filepath.Join(root, path, "cpu.stat"))
		if err != nil {
			continue
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			var usec int64
			if n, _ := fmt.Sscanf(sc.Text(), "usage_usec %d", &usec); n == 1 {
				return time.Duration(usec) * time.Microsecond, nil
			}
		}
		return 0, fmt.Errorf("cpu.stat of %s has no usage_usec", path)
	}
	return 0, errdefs.ErrNotFound.WithMessage(fmt.Sprintf("no cpu accounting for cgroup %s", path))
}
