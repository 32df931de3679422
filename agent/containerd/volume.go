package containerd

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/opencontainers/runtime-spec/specs-go"

	"github.com/ccattler/ccattler/agent"
	"github.com/ccattler/ccattler/facts"
)

// A volume is a directory of the node, VolumeDir/{name}, bind-mounted
// read-write at /volumes/{name} into every container of an instance that
// uses it. It outlives the containers: a replacement on the same node finds
// what its predecessor wrote.

// VolumePath is where an instance's volume is mounted inside its container.
func VolumePath(name string) string { return "/volumes/" + name }

func (r *Runtime) volumeMount(name string) (specs.Mount, error) {
	if err := facts.CheckSegment("name", name); err != nil {
		return specs.Mount{}, fmt.Errorf("volume %q: %w", name, err)
	}
	if r.cfg.VolumeDir == "" {
		return specs.Mount{}, errors.New("the instance uses volume " + name + " but the agent keeps no volumes (start it with --state-dir)")
	}
	dir := filepath.Join(r.cfg.VolumeDir, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return specs.Mount{}, fmt.Errorf("volume %s: %w", name, err)
	}
	return specs.Mount{Destination: VolumePath(name), Type: "bind", Source: dir, Options: []string{"rbind", "rw"}}, nil
}

var _ agent.VolumeRemover = (*Runtime)(nil)

// RemoveVolume deletes a volume's directory and everything in it.
func (r *Runtime) RemoveVolume(name string) error {
	if err := facts.CheckSegment("name", name); err != nil || r.cfg.VolumeDir == "" {
		return err
	}
	return os.RemoveAll(filepath.Join(r.cfg.VolumeDir, name))
}
