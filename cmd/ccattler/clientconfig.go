package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/ccattler/ccattler/facts/spec"
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/gohcl"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/hashicorp/hcl/v2/hclwrite"
	"github.com/spf13/cobra"
	"github.com/zclconf/go-cty/cty"
)

// The client configuration file: named contexts, each the endpoints and
// certificates of one cluster, and the one commands use unless told
// otherwise (kubectl's kubeconfig, nomad's NOMAD_ADDR in a file). It only
// fills in what neither a flag nor an environment variable gives.
//
//	current_context = "prod"
//
//	context "prod" {
//	  etcd    = ["https://10.0.0.1:2379", "https://10.0.0.2:2379"]
//	  tls_dir = "/etc/ccattler/pki"   # or cacert, cert, key
//	}

// clientConfig is the file's content.
type clientConfig struct {
	CurrentContext string          `hcl:"current_context,optional"`
	Contexts       []clientContext `hcl:"context,block"`
}

// clientContext is one cluster as the client reaches it. Relative paths are
// relative to the file's directory.
type clientContext struct {
	Name     string   `hcl:"name,label"`
	Etcd     []string `hcl:"etcd,optional"`
	CACert   string   `hcl:"cacert,optional"`
	Cert     string   `hcl:"cert,optional"`
	Key      string   `hcl:"key,optional"`
	TLSDir   string   `hcl:"tls_dir,optional"`
	Identity string   `hcl:"identity,optional"`
	Root     string   `hcl:"root,optional"`
}

// configPath is where the file is: $CCATTLER_CONFIG, else
// $XDG_CONFIG_HOME/ccattler/config.hcl, else ~/.config/ccattler/config.hcl.
func configPath() (string, error) {
	if p := os.Getenv("CCATTLER_CONFIG"); p != "" {
		return p, nil
	}
	if d := os.Getenv("XDG_CONFIG_HOME"); d != "" {
		return filepath.Join(d, "ccattler", "config.hcl"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("find the client configuration: %w; set CCATTLER_CONFIG", err)
	}
	return filepath.Join(home, ".config", "ccattler", "config.hcl"), nil
}

// loadClientConfig reads the file at path; a missing file is an empty
// configuration. A mistake is an error naming file:line:col.
func loadClientConfig(path string) (*clientConfig, error) {
	src, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return &clientConfig{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the client configuration: %w", err)
	}
	f, diags := hclsyntax.ParseConfig(src, path, hcl.InitialPos)
	cfg := &clientConfig{}
	if !diags.HasErrors() {
		diags = append(diags, gohcl.DecodeBody(f.Body, nil, cfg)...)
	}
	seen := map[string]bool{}
	for _, c := range cfg.Contexts {
		if seen[c.Name] {
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Duplicate context",
				Detail: fmt.Sprintf("Context %q is declared twice in %s: keep one.", c.Name, path)})
		}
		seen[c.Name] = true
	}
	if diags.HasErrors() {
		var b strings.Builder
		files := map[string]*hcl.File{}
		if f != nil {
			files[path] = f
		}
		_ = spec.WriteDiagnostics(&b, files, diags)
		return nil, exitError{code: 1, err: fmt.Errorf("client configuration %s rejected (fix it, or point CCATTLER_CONFIG elsewhere):\n%s", path, strings.TrimRight(b.String(), "\n"))}
	}
	dir := filepath.Dir(path)
	for i := range cfg.Contexts {
		c := &cfg.Contexts[i]
		for _, p := range []*string{&c.CACert, &c.Cert, &c.Key, &c.TLSDir} {
			if *p != "" && !filepath.IsAbs(*p) {
				*p = filepath.Join(dir, *p)
			}
		}
	}
	return cfg, nil
}

func (c *clientConfig) find(name string) *clientContext {
	for i := range c.Contexts {
		if c.Contexts[i].Name == name {
			return &c.Contexts[i]
		}
	}
	return nil
}

func (c *clientConfig) names() []string {
	var out []string
	for _, x := range c.Contexts {
		out = append(out, x.Name)
	}
	slices.Sort(out)
	return out
}

// contextFree are the commands that take no context: they start a control
// plane (whose own flags say where) or read only local files.
var contextFree = map[string]bool{"server": true, "dev": true, "config": true, "validate": true, "certs": true, "help": true, "completion": true, "version": true}

// applyContext fills in, from the chosen context (--context, else
// $CCATTLER_CONTEXT, else the file's current_context), what neither a flag
// nor an environment variable set: the endpoints, the root, and the
// certificates (as one group: any TLS flag or variable given, the context's
// certificates are not mixed in). Endpoints given by --etcd or
// $CCATTLER_ETCD leave the context out altogether: they name another
// cluster than the context's.
func applyContext(cmd *cobra.Command) error {
	if parts := strings.Fields(cmd.CommandPath()); len(parts) > 1 && contextFree[parts[1]] {
		return nil
	}
	name, named := g.context, g.context != ""
	if !named {
		name = envContext()
		named = name != ""
	}
	path, err := configPath()
	if err != nil {
		if named {
			return err
		}
		return nil
	}
	cfg, err := loadClientConfig(path)
	if err != nil {
		return err
	}
	if name == "" {
		name = cfg.CurrentContext
	}
	if name == "" {
		return nil
	}
	c := cfg.find(name)
	if c == nil {
		known := "none"
		if n := cfg.names(); len(n) > 0 {
			known = strings.Join(n, ", ")
		}
		return usageError("context %q is not in %s (known: %s); see ccattler config get-contexts", name, path, known)
	}
	fl := cmd.Flags()
	unset := func(flag, env string) bool { return !fl.Changed(flag) && os.Getenv(env) == "" }
	if !unset("etcd", "CCATTLER_ETCD") {
		// Endpoints given otherwise are another cluster: the context's
		// certificates and root are its own, not theirs.
		return nil
	}
	if len(c.Etcd) > 0 {
		g.etcd, g.etcdGiven = strings.Join(c.Etcd, ","), true
	}
	if c.Root != "" && !fl.Changed("root") {
		g.root = c.Root
	}
	tlsSet := false
	for _, fe := range [][2]string{{"cacert", "CCATTLER_CACERT"}, {"cert", "CCATTLER_CERT"}, {"key", "CCATTLER_KEY"}, {"tls-dir", "CCATTLER_TLS_DIR"}} {
		tlsSet = tlsSet || !unset(fe[0], fe[1])
	}
	if !tlsSet {
		g.tls.cacert, g.tls.cert, g.tls.key, g.tls.dir = c.CACert, c.Cert, c.Key, c.TLSDir
	}
	if c.Identity != "" && unset("identity", "CCATTLER_IDENTITY") {
		g.tls.identity = c.Identity
	}
	return nil
}

// editClientConfig changes the file at path under an exclusive lock (two
// `ccattler dev` starting together each add their context), keeping the
// comments and layout of what it does not touch, and replaces it in one
// rename.
func editClientConfig(path string, edit func(cfg *clientConfig, body *hclwrite.Body) error) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("create the client configuration's directory: %w", err)
	}
	lock, err := os.OpenFile(path+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return fmt.Errorf("lock the client configuration: %w", err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("lock the client configuration: %w", err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN) //nolint:errcheck // closing unlocks too
	cfg, err := loadClientConfig(path)
	if err != nil {
		return err
	}
	src, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("read the client configuration: %w", err)
	}
	f, diags := hclwrite.ParseConfig(src, path, hcl.InitialPos)
	if diags.HasErrors() {
		return fmt.Errorf("client configuration %s: %s", path, diags.Error())
	}
	if err := edit(cfg, f.Body()); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".config-*.hcl")
	if err != nil {
		return fmt.Errorf("write the client configuration: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(hclwrite.Format(f.Bytes())); err != nil {
		tmp.Close()
		return fmt.Errorf("write the client configuration: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write the client configuration: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write the client configuration: %w", err)
	}
	return nil
}

// setContextBlock replaces (or adds) the context block of c.
func setContextBlock(body *hclwrite.Body, c clientContext) {
	removeContextBlock(body, c.Name)
	b := body.AppendNewBlock("context", []string{c.Name}).Body()
	if len(c.Etcd) > 0 {
		var eps []cty.Value
		for _, e := range c.Etcd {
			eps = append(eps, cty.StringVal(e))
		}
		b.SetAttributeValue("etcd", cty.ListVal(eps))
	}
	for _, a := range []struct{ name, v string }{{"root", c.Root}, {"cacert", c.CACert}, {"cert", c.Cert}, {"key", c.Key},
		{"tls_dir", c.TLSDir}, {"identity", c.Identity}} {
		if a.v != "" {
			b.SetAttributeValue(a.name, cty.StringVal(a.v))
		}
	}
}

// removeContextBlock removes the context block named name; it says whether there was one.
func removeContextBlock(body *hclwrite.Body, name string) bool {
	found := false
	for _, blk := range body.Blocks() {
		if blk.Type() == "context" && slices.Equal(blk.Labels(), []string{name}) {
			body.RemoveBlock(blk)
			found = true
		}
	}
	return found
}

// setCurrentContext sets current_context, or removes it when name is "".
func setCurrentContext(body *hclwrite.Body, name string) {
	if name == "" {
		body.RemoveAttribute("current_context")
		return
	}
	body.SetAttributeValue("current_context", cty.StringVal(name))
}

// envContext is $CCATTLER_CONTEXT.
func envContext() string { return os.Getenv("CCATTLER_CONTEXT") }
