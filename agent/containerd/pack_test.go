package containerd

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"io"
	"strings"
	"testing"
)

// TestPackIsDeterministic: the same files give the same archive, whose
// layer holds the files, their parent directories and the links.
func TestPackIsDeterministic(t *testing.T) {
	spec := PackSpec{Ref: "busybox:1", Entrypoint: []string{"/bin/sh"}, Env: []string{"PATH=/bin"},
		Files: []PackFile{{Path: "/bin/busybox", Data: []byte("#!binary")}, {Path: "/bin/sh", Link: "/bin/busybox"}}}
	var a, b bytes.Buffer
	if err := Pack(&a, spec); err != nil {
		t.Fatal(err)
	}
	spec.Files[0], spec.Files[1] = spec.Files[1], spec.Files[0] // order does not matter
	if err := Pack(&b, spec); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Fatal("packing the same files twice gave different archives")
	}
	var entries, layer []string
	var index string
	tr := tar.NewReader(&a)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		entries = append(entries, h.Name)
		body, _ := io.ReadAll(tr)
		if h.Name == "index.json" {
			index = string(body)
		}
		if zr, err := gzip.NewReader(bytes.NewReader(body)); err == nil { // the layer
			lt := tar.NewReader(zr)
			for {
				lh, err := lt.Next()
				if err != nil {
					break
				}
				layer = append(layer, lh.Name+"->"+lh.Linkname)
			}
		}
	}
	if got := strings.Join(layer, " "); got != "bin/-> bin/busybox-> bin/sh->/bin/busybox" {
		t.Errorf("layer: %s", got)
	}
	if len(entries) != 5 || entries[0] != "oci-layout" || entries[1] != "index.json" {
		t.Errorf("archive entries: %v", entries)
	}
	if !strings.Contains(index, `"org.opencontainers.image.ref.name":"busybox:1"`) {
		t.Errorf("index does not name the image: %v", index)
	}
}

func TestPackRejects(t *testing.T) {
	for _, tc := range []struct {
		spec PackSpec
		want string
	}{
		{PackSpec{Files: []PackFile{{Path: "/x"}}}, "no image name"},
		{PackSpec{Ref: "Bad Name", Files: []PackFile{{Path: "/x"}}}, "Bad Name"},
		{PackSpec{Ref: "x:1"}, "no files"},
		{PackSpec{Ref: "x:1", Files: []PackFile{{Path: "bin/x"}}}, "absolute path"},
		{PackSpec{Ref: "x:1", Files: []PackFile{{Path: "/x"}, {Path: "/x/"}}}, "given twice"},
	} {
		if err := Pack(io.Discard, tc.spec); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Pack(%+v) = %v, want an error containing %q", tc.spec, err, tc.want)
		}
	}
}
