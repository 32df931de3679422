package agent

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// The local cache keeps what a node was last told to run, so that an agent
// cut off from etcd (or restarted while cut off) knows its placements and
// their specs. It is one file per node:
//
//	ccattler-agent-cache v1 sha256:<hex of the body>\n
//	<JSON body>
//
// written to a temporary file, synced and renamed over the old one, so a
// crash leaves either the old or the new cache, never half of one.

const cacheMagic = "ccattler-agent-cache v1 sha256:"

// ErrCacheCorrupt is returned (wrapped) when a cache file does not match its checksum or does not parse.
var ErrCacheCorrupt = errors.New("agent: cache is corrupt")

// cacheBody is the cached state of one node.
type cacheBody struct {
	Node      string            `json:"node"`
	Rev       int64             `json:"rev"` // etcd revision the placements were read at
	Instances map[string]Spec   `json:"instances"`
	Failed    map[string]string `json:"failed,omitempty"` // instance -> reason; never retried
	SavedAt   time.Time         `json:"saved_at"`
}

func cachePath(dir, node string) string { return filepath.Join(dir, "node-"+node+".cache") }

// saveCache writes body atomically. sync false skips fsync (simulated nodes,
// whose cache is only exercised, not relied on).
func saveCache(path string, body cacheBody, sync bool) error {
	js, err := json.Marshal(body)
	if err != nil {
		return fmt.Errorf("encode cache %s: %w", path, err)
	}
	sum := sha256.Sum256(js)
	var buf bytes.Buffer
	buf.WriteString(cacheMagic)
	buf.WriteString(hex.EncodeToString(sum[:]))
	buf.WriteByte('\n')
	buf.Write(js)
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write cache %s: %w", path, err)
	}
	defer os.Remove(tmp.Name()) // a no-op once renamed
	if _, err := tmp.Write(buf.Bytes()); err != nil {
		tmp.Close()
		return fmt.Errorf("write cache %s: %w", path, err)
	}
	if sync {
		if err := tmp.Sync(); err != nil {
			tmp.Close()
			return fmt.Errorf("sync cache %s: %w", path, err)
		}
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write cache %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("replace cache %s: %w", path, err)
	}
	if sync {
		if d, err := os.Open(filepath.Dir(path)); err == nil {
			_ = d.Sync() // make the rename durable; a failure only risks the old cache
			d.Close()
		}
	}
	return nil
}

// loadCache reads a cache file. A missing file is (zero, false, nil); a file
// that fails its checksum or does not parse is ErrCacheCorrupt.
func loadCache(path string) (cacheBody, bool, error) {
	raw, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return cacheBody{}, false, nil
	}
	if err != nil {
		return cacheBody{}, false, fmt.Errorf("read cache %s: %w", path, err)
	}
	head, js, ok := bytes.Cut(raw, []byte{'\n'})
	if !ok || !bytes.HasPrefix(head, []byte(cacheMagic)) {
		return cacheBody{}, true, fmt.Errorf("%w: %s: missing %q header", ErrCacheCorrupt, path, cacheMagic)
	}
	sum := sha256.Sum256(js)
	if got := string(head[len(cacheMagic):]); got != hex.EncodeToString(sum[:]) {
		return cacheBody{}, true, fmt.Errorf("%w: %s: checksum mismatch (file says %.12s…, content is %.12s…)",
			ErrCacheCorrupt, path, got, hex.EncodeToString(sum[:]))
	}
	var body cacheBody
	if err := json.Unmarshal(js, &body); err != nil {
		return cacheBody{}, true, fmt.Errorf("%w: %s: %v", ErrCacheCorrupt, path, err)
	}
	return body, true, nil
}
