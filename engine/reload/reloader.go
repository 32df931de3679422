package reload

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/facts/hclcheck"
	"github.com/ccattler/ccattler/rules"
	"github.com/hashicorp/hcl/v2"
)

// Outcomes of one reload.
const (
	Accepted  = "accepted"  // a new version replaced the running one
	Unchanged = "unchanged" // the files hold the running version: nothing changed
	Rejected  = "rejected"  // the files do not load: the running set stays
)

// Config says where a Reloader reads rule sets and whom it tells.
type Config struct {
	// Dir is the rule directory (*.hcl, not *_test.hcl). Empty: Builtin.
	Dir string
	// Builtin holds the files of the built-in policies, by name, used when
	// Dir is empty: they cannot change, so a reload finds them unchanged.
	Builtin map[string][]byte
	// Source names where the set comes from in the status; default Dir.
	Source string
	// Store is where reload records and the status are written; its Schema
	// types the rules (plugin types registered under schema/ included).
	Store *facts.Store
	// Identity names this server in records and in its status key.
	Identity string
	// Install hands an accepted set to the engine. It must not block: the
	// engine takes the set between two rounds (engine.Engine.Swap).
	Install func(rs *rules.RuleSet)
	// Permit, when set, is asked about every rule set that loads: a set it
	// finds problems with is rejected like one that does not load (the
	// server checks that the engine's identity may write every tree the
	// set's principals write).
	Permit func(rs *rules.RuleSet) hcl.Diagnostics
	// Watch makes Run poll Dir for changes every Poll (default 500ms).
	Watch bool
	Poll  time.Duration
	// StatusTTL is the lease the status key is held on (default 10s): a
	// stopped server's status disappears within about this long.
	StatusTTL time.Duration
	Log       *slog.Logger
}

// Status is what a server reports about its rule set, in its status key and
// on `ccattler rules status`.
type Status struct {
	Server   string    `json:"server"`
	Source   string    `json:"source"` // the directory, or "(built-in default policies)"
	Watch    bool      `json:"watch"`
	Version  string    `json:"version"`
	Files    []string  `json:"files"`
	Rules    int       `json:"rules"`
	LoadedAt time.Time `json:"loaded_at"`
	Reloads  int64     `json:"reloads"`         // accepted reloads since start
	Failures int64     `json:"reload_failures"` // rejected reloads since start
	// LastRequest is the answer to the latest `ccattler rules reload`;
	// Requests the answers to the last few, newest last, so that requests
	// made at the same time each find their answer.
	LastRequest *Result  `json:"last_request,omitempty"`
	Requests    []Result `json:"requests,omitempty"`
	// LastRejected is the latest rejected reload, with its diagnostics.
	LastRejected *Result `json:"last_rejected,omitempty"`
	// Leading is filled in by readers (ReadStatus): this server's engine
	// holds the election.
	Leading bool `json:"leading"`
}

// Result is the outcome of one reload.
type Result struct {
	Request     string    `json:"request,omitempty"` // the id of the `rules reload` request that asked for it
	Cause       string    `json:"cause"`             // request, watch, ...
	Outcome     string    `json:"outcome"`           // accepted | unchanged | rejected
	Version     string    `json:"version,omitempty"` // the version loaded (rejected: the files' hash)
	Previous    string    `json:"previous,omitempty"`
	At          time.Time `json:"at"`
	Errors      int       `json:"errors,omitempty"`
	Diagnostics string    `json:"diagnostics,omitempty"` // file:line:col: ... with source snippets
}

// keptAnswers is how many answers to requests a status holds.
const keptAnswers = 8

// Reloader loads rule sets and installs the sound ones. Create it with New.
type Reloader struct {
	cfg Config
	log *slog.Logger
	ids *facts.EventIDs

	reloading sync.Mutex // serializes reloads: one set is loaded at a time

	mu      sync.Mutex // guards st and changed
	st      Status
	changed chan struct{} // has a token when st changed since the status key was written
}

// New returns a Reloader whose running set is rs (already installed).
func New(cfg Config, rs *rules.RuleSet) (*Reloader, error) {
	if cfg.Store == nil || cfg.Install == nil || rs == nil {
		return nil, errors.New("reload: New needs a store, an Install function and the running rule set")
	}
	if cfg.Dir == "" && len(cfg.Builtin) == 0 {
		return nil, errors.New("reload: Config needs a Dir or the Builtin files")
	}
	if cfg.Source == "" {
		cfg.Source = cfg.Dir
	}
	if cfg.Poll <= 0 {
		cfg.Poll = 500 * time.Millisecond
	}
	if cfg.StatusTTL <= 0 {
		cfg.StatusTTL = 10 * time.Second
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r := &Reloader{cfg: cfg, log: log, ids: facts.NewEventIDs(), changed: make(chan struct{}, 1)}
	r.st = Status{Server: cfg.Identity, Source: cfg.Source, Watch: cfg.Watch && cfg.Dir != "",
		Version: rs.Version, Files: rs.Files, Rules: len(rs.Rules), LoadedAt: time.Now().UTC()}
	return r, nil
}

// Status returns a copy of the current status.
func (r *Reloader) Status() Status {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.st
}

// Load reads and checks the configured rule set without installing it. The
// parsed files come back also on rejection, for printing diagnostics.
func (r *Reloader) Load() (*rules.RuleSet, map[string]*hcl.File, hcl.Diagnostics) {
	rs, files, diags, _ := r.load()
	return rs, files, diags
}

// load is Load that also returns the version hash of the files read, also
// when they do not load.
func (r *Reloader) load() (*rules.RuleSet, map[string]*hcl.File, hcl.Diagnostics, string) {
	srcs := r.cfg.Builtin
	if r.cfg.Dir != "" {
		var diags hcl.Diagnostics
		srcs, diags = ReadDir(r.cfg.Dir)
		if diags.HasErrors() {
			return nil, nil, diags, ""
		}
	}
	rs, files, diags := rules.LoadFilesWithSources(srcs, rules.WithSchema(r.cfg.Store.Schema))
	if !diags.HasErrors() && r.cfg.Permit != nil {
		diags = append(diags, r.cfg.Permit(rs)...)
	}
	return rs, files, diags, Version(srcs)
}

// Reload loads the rule set again and installs it if it is sound and new.
// cause says why (request, watch, ...); request is the id of the `rules
// reload` request being answered, if any. A rejection and an accepted
// change are logged and recorded under event/; an unchanged set is neither.
func (r *Reloader) Reload(ctx context.Context, cause, request string) Result {
	r.reloading.Lock()
	defer r.reloading.Unlock()
	rs, files, diags, version := r.load()
	prev := r.Status().Version
	res := Result{Request: request, Cause: cause, Previous: prev, At: time.Now().UTC()}
	switch {
	case diags.HasErrors():
		var b strings.Builder
		_ = rules.WriteDiagnostics(&b, files, diags)
		res.Outcome, res.Diagnostics = Rejected, b.String()
		for _, d := range diags {
			if d.Severity == hcl.DiagError {
				res.Errors++
			}
		}
		res.Version = version
		r.log.Warn("reload: rule set rejected; the running set stays", "source", r.cfg.Source, "cause", cause,
			"running", prev, "errors", res.Errors, "diagnostics", res.Diagnostics)
	case rs.Version == prev:
		res.Outcome, res.Version = Unchanged, rs.Version
		r.log.Info("reload: rule set unchanged", "source", r.cfg.Source, "cause", cause, "version", prev)
	default:
		res.Outcome, res.Version = Accepted, rs.Version
		r.cfg.Install(rs)
		r.log.Info("reload: rule set accepted; the engine takes it between two rounds", "source", r.cfg.Source,
			"cause", cause, "version", rs.Version, "previous", prev, "rules", len(rs.Rules), "files", len(rs.Files))
	}
	r.mu.Lock()
	if res.Outcome == Accepted {
		r.st.Version, r.st.Files, r.st.Rules, r.st.LoadedAt = rs.Version, rs.Files, len(rs.Rules), res.At
		r.st.Reloads++
	}
	if res.Outcome == Rejected {
		r.st.Failures++
		rej := res
		r.st.LastRejected = &rej
	}
	if request != "" {
		req := res
		r.st.LastRequest = &req
		r.st.Requests = append(r.st.Requests[max(0, len(r.st.Requests)-keptAnswers+1):], res)
	}
	r.mu.Unlock()
	r.touch()
	if res.Outcome != Unchanged {
		if err := r.record(ctx, rs, res); err != nil {
			r.log.Warn("reload: could not record the reload under event/", "err", err)
		}
	}
	return res
}

// touch says the status changed, for the status key writer.
func (r *Reloader) touch() {
	select {
	case r.changed <- struct{}{}:
	default:
	}
}

// record writes the reload's record under event/: an accepted reload with
// the new set's rules, a rejection with its diagnostics.
func (r *Reloader) record(ctx context.Context, rs *rules.RuleSet, res Result) error {
	id, at := r.ids.Next()
	rec := facts.EventRecord{Rule: "reload", Version: res.Version, Time: at.Format(time.RFC3339Nano),
		Leader: r.cfg.Identity, Bindings: map[string]string{"source": r.cfg.Source, "cause": res.Cause, "previous": res.Previous}}
	if res.Outcome == Rejected {
		rec.Kind = "reload-rejected"
		rec.Message = fmt.Sprintf("rule set rejected (%s); version %s keeps running:\n%s", Errors(res.Errors), res.Previous, res.Diagnostics)
	} else {
		rec.Kind = "reload"
		rec.Message = fmt.Sprintf("rule set %s accepted: %d rules in %d files, replacing %s", rs.Version, len(rs.Rules), len(rs.Files), res.Previous)
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	key := facts.Event(id)
	_, err = r.cfg.Store.Commit(ctx, facts.Txn{If: []facts.Cond{{Key: key}}, Ops: []facts.Op{facts.Put(key, b)}})
	return err
}

// ReadDir reads the rule files of dir (*.hcl, not *_test.hcl, not
// recursive) by path, as rules.LoadWithFiles does.
func ReadDir(dir string) (map[string][]byte, hcl.Diagnostics) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Cannot read rule directory",
			Detail: fmt.Sprintf("Reading %s: %v.", dir, err)}}
	}
	files := map[string][]byte{}
	for _, e := range ents {
		if e.IsDir() || !rules.IsRuleFile(e.Name()) {
			continue
		}
		p := filepath.Join(dir, e.Name())
		b, err := hclcheck.ReadFile(p)
		if err != nil {
			return nil, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Cannot read rule file",
				Detail: fmt.Sprintf("Reading %s: %v.", p, err)}}
		}
		files[p] = b
	}
	if len(files) == 0 {
		return nil, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "No rule files",
			Detail: fmt.Sprintf("%s holds no *.hcl rule files.", dir)}}
	}
	return files, nil
}

// Version is the version hash rules.Load gives these files (the sorted
// files' base names, lengths and contents), computed also for files that do
// not load, so that a rejection names what was tried.
func Version(files map[string][]byte) string {
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	h := sha256.New()
	for _, n := range names {
		fmt.Fprintf(h, "%s\x00%d\x00", filepath.Base(n), len(files[n]))
		h.Write(files[n])
	}
	return hex.EncodeToString(h.Sum(nil))[:12]
}

// Errors says "1 error" or "n errors".
func Errors(n int) string {
	if n == 1 {
		return "1 error"
	}
	return fmt.Sprintf("%d errors", n)
}
