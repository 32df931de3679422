package containerd

import (
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/errdefs"
	"github.com/distribution/reference"
)

// normalize turns an image as a service names it ("nginx:1.28") into the
// full reference containerd stores ("docker.io/library/nginx:1.28").
func normalize(image string) (string, error) {
	ref, err := reference.ParseDockerRef(image)
	if err != nil {
		return "", fmt.Errorf("image %q: %w", image, err)
	}
	return ref.String(), nil
}

// image returns the image unpacked into the snapshotter: one imported or
// pulled earlier, or else pulled now.
func (r *Runtime) image(ctx context.Context, name string) (client.Image, error) {
	ref, err := normalize(name)
	if err != nil {
		return nil, err
	}
	img, err := r.c.GetImage(ctx, ref)
	if errdefs.IsNotFound(err) {
		pctx, cancel := context.WithTimeout(ctx, r.cfg.PullTimeout)
		defer cancel()
		r.cfg.Log.Info("pulling image", "image", ref)
		img, err = r.c.Pull(pctx, ref, client.WithPullUnpack, client.WithPullSnapshotter(r.cfg.Snapshotter))
		if err != nil {
			return nil, fmt.Errorf("image %s is not imported and could not be pulled: %w", ref, err)
		}
		return img, nil
	}
	if err != nil {
		return nil, fmt.Errorf("look up image %s: %w", ref, err)
	}
	unpacked, err := img.IsUnpacked(ctx, r.cfg.Snapshotter)
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", ref, err)
	}
	if !unpacked {
		if err := img.Unpack(ctx, r.cfg.Snapshotter); err != nil {
			return nil, fmt.Errorf("unpack image %s: %w", ref, err)
		}
	}
	return img, nil
}

// Import loads an OCI or docker image archive (tar, or tar.gz) into
// containerd and unpacks it; it returns the names of the images imported.
// Names come from the index's io.containerd.image.name annotation, or from
// org.opencontainers.image.ref.name normalized like a service's image.
func (r *Runtime) Import(ctx context.Context, path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("import %s: %w", path, err)
	}
	defer f.Close()
	var rd io.Reader = f
	if strings.HasSuffix(path, ".gz") || strings.HasSuffix(path, ".tgz") {
		gz, err := gzip.NewReader(f)
		if err != nil {
			return nil, fmt.Errorf("import %s: %w", path, err)
		}
		defer gz.Close()
		rd = gz
	}
	imgs, err := r.c.Import(ctx, rd, client.WithImageRefTranslator(func(s string) string {
		if n, err := normalize(s); err == nil {
			return n
		}
		return ""
	}))
	if err != nil {
		return nil, fmt.Errorf("import %s: %w", path, err)
	}
	if len(imgs) == 0 {
		return nil, fmt.Errorf("import %s: the archive names no image (set org.opencontainers.image.ref.name on its manifest)", path)
	}
	var names []string
	for _, im := range imgs {
		img := client.NewImage(r.c, im)
		if err := img.Unpack(ctx, r.cfg.Snapshotter); err != nil {
			return names, fmt.Errorf("import %s: unpack %s: %w", path, im.Name, err)
		}
		names = append(names, im.Name)
	}
	return names, nil
}

// importDir imports every archive in dir. A bad archive is logged, not fatal:
// the instances that need its image fail with the reason, the others run.
func (r *Runtime) importDir(ctx context.Context, dir string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		r.cfg.Log.Error("read --image-dir", "dir", dir, "err", err)
		return
	}
	var files []string
	for _, e := range entries {
		if !e.IsDir() && (strings.HasSuffix(e.Name(), ".tar") || strings.HasSuffix(e.Name(), ".tar.gz") || strings.HasSuffix(e.Name(), ".tgz")) {
			files = append(files, filepath.Join(dir, e.Name()))
		}
	}
	sort.Strings(files)
	for _, f := range files {
		names, err := r.Import(ctx, f)
		if err != nil {
			r.cfg.Log.Error("import image archive", "file", f, "err", err)
			continue
		}
		r.cfg.Log.Info("imported image archive", "file", f, "images", names)
	}
}
