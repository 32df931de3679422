package containerd

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"path"
	"runtime"
	"sort"
	"strings"
	"time"
)

// PackFile is one entry of an image packed by Pack: a file with its
// content, or a symbolic link (Link set, e.g. /bin/sh -> /bin/busybox).
type PackFile struct {
	Path string // absolute path in the image, e.g. /bin/busybox
	Mode int64  // permission bits; 0755 if 0
	Data []byte
	Link string // the link's target; Data is ignored
}

// PackSpec is an image to pack: its name and what it runs.
type PackSpec struct {
	Ref        string // the name it is imported under, e.g. busybox:1 (a service's image)
	Files      []PackFile
	Entrypoint []string // e.g. ["/bin/sh", "-c"]; a service's command replaces it
	Cmd        []string // default arguments; a service's args replace them
	Env        []string // e.g. ["PATH=/bin"]
	Arch       string   // default: this machine's (runtime.GOARCH)
}

// Pack writes an OCI image archive (oci-layout, index.json and blobs, one
// gzipped layer) of spec to w: what `ccattler image import` and the
// agent's --image-dir load, for machines without a registry. The output
// depends only on spec (fixed times and order), so packing twice gives the
// same image digest.
func Pack(w io.Writer, spec PackSpec) error {
	if spec.Ref == "" {
		return fmt.Errorf("pack: no image name")
	}
	if _, err := normalize(spec.Ref); err != nil {
		return fmt.Errorf("pack: %w", err)
	}
	if len(spec.Files) == 0 {
		return fmt.Errorf("pack %s: no files", spec.Ref)
	}
	if spec.Arch == "" {
		spec.Arch = runtime.GOARCH
	}
	layer, err := packLayer(spec.Files)
	if err != nil {
		return fmt.Errorf("pack %s: %w", spec.Ref, err)
	}
	diffID := sha256.Sum256(layer)
	var gz bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&gz, gzip.BestCompression)
	zw.Write(layer)
	zw.Close()

	blobs := map[string][]byte{}
	desc := func(mediaType string, b []byte) map[string]any {
		sum := sha256.Sum256(b)
		h := hex.EncodeToString(sum[:])
		blobs[h] = b
		return map[string]any{"mediaType": mediaType, "digest": "sha256:" + h, "size": len(b)}
	}
	cfg := map[string]any{}
	if len(spec.Entrypoint) > 0 {
		cfg["Entrypoint"] = spec.Entrypoint
	}
	if len(spec.Cmd) > 0 {
		cfg["Cmd"] = spec.Cmd
	}
	if len(spec.Env) > 0 {
		cfg["Env"] = spec.Env
	}
	config, _ := json.Marshal(map[string]any{
		"architecture": spec.Arch, "os": "linux", "config": cfg,
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{"sha256:" + hex.EncodeToString(diffID[:])}},
	})
	manifest, _ := json.Marshal(map[string]any{
		"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
		"config": desc("application/vnd.oci.image.config.v1+json", config),
		"layers": []any{desc("application/vnd.oci.image.layer.v1.tar+gzip", gz.Bytes())},
	})
	md := desc("application/vnd.oci.image.manifest.v1+json", manifest)
	md["annotations"] = map[string]string{"org.opencontainers.image.ref.name": spec.Ref}
	index, _ := json.Marshal(map[string]any{"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
		"manifests": []any{md}})

	aw := tar.NewWriter(w)
	add := func(name string, b []byte) error {
		if err := aw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(b)), ModTime: time.Unix(0, 0)}); err != nil {
			return err
		}
		_, err := aw.Write(b)
		return err
	}
	if err := add("oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)); err != nil {
		return fmt.Errorf("pack %s: %w", spec.Ref, err)
	}
	if err := add("index.json", index); err != nil {
		return fmt.Errorf("pack %s: %w", spec.Ref, err)
	}
	names := make([]string, 0, len(blobs))
	for h := range blobs {
		names = append(names, h)
	}
	sort.Strings(names)
	for _, h := range names {
		if err := add("blobs/sha256/"+h, blobs[h]); err != nil {
			return fmt.Errorf("pack %s: %w", spec.Ref, err)
		}
	}
	if err := aw.Close(); err != nil {
		return fmt.Errorf("pack %s: %w", spec.Ref, err)
	}
	return nil
}

// packLayer is the uncompressed layer tar: parent directories first, then
// the files, in path order.
func packLayer(files []PackFile) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dirs := map[string]bool{}
	sorted := append([]PackFile(nil), files...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Path < sorted[j].Path })
	seen := map[string]bool{}
	for _, f := range sorted {
		p := path.Clean(f.Path)
		if !strings.HasPrefix(p, "/") || p == "/" {
			return nil, fmt.Errorf("file %q: expected an absolute path such as /bin/busybox", f.Path)
		}
		name := strings.TrimPrefix(p, "/")
		if seen[name] {
			return nil, fmt.Errorf("file %s given twice", p)
		}
		seen[name] = true
		var parents []string
		for d := path.Dir(name); d != "." && !dirs[d]; d = path.Dir(d) {
			parents = append(parents, d)
		}
		for i := len(parents) - 1; i >= 0; i-- {
			dirs[parents[i]] = true
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: parents[i] + "/", Mode: 0o755, ModTime: time.Unix(0, 0)}); err != nil {
				return nil, err
			}
		}
		hdr := &tar.Header{Name: name, Mode: f.Mode, ModTime: time.Unix(0, 0)}
		if hdr.Mode == 0 {
			hdr.Mode = 0o755
		}
		if f.Link != "" {
			hdr.Typeflag, hdr.Linkname = tar.TypeSymlink, f.Link
		} else {
			hdr.Typeflag, hdr.Size = tar.TypeReg, int64(len(f.Data))
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, err
		}
		if f.Link == "" {
			if _, err := tw.Write(f.Data); err != nil {
				return nil, err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
