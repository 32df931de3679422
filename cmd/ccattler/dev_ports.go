package main

import (
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"

	"github.com/ccattler/ccattler/facts"
	"github.com/hashicorp/hcl/v2/hclwrite"
	"github.com/spf13/pflag"
)

// defaultDevAdminAddr is where dev serves /metrics unless it is taken.
const defaultDevAdminAddr = defaultAdminAddr

// devOps are dev's flags beside devFlags: the admin endpoint and hot reload.
type devOps struct {
	watch string // --watch DIR: run DIR's rules and reload them when they change
	admin string // --admin-addr
}

func addDevOpsFlags(fl *pflag.FlagSet, o *devOps) {
	fl.StringVar(&o.watch, "watch", "", "run the rule set in DIR (like --policies DIR) and reload it when its files change; a set with errors is rejected and the running one stays")
	fl.StringVar(&o.admin, "admin-addr", defaultDevAdminAddr, "host:port serving the console at /ui/ and /metrics (a free port when the default is taken; empty: none)")
}

// devPorts moves each of dev's listen addresses the user did not choose to
// a free port when its default is taken (another dev, a server), and says
// so on out: the context dev writes tells the other commands where it went.
func devPorts(fl *pflag.FlagSet, cfg *serverConfig, o *devOps, out io.Writer) error {
	var held []net.Listener // the ports found free, held until all are found
	defer func() {
		for _, ln := range held {
			ln.Close()
		}
	}()
	for _, u := range []struct {
		flag string
		url  *string
	}{{"listen-client", &cfg.Embed.ClientURL}, {"listen-peer", &cfg.Embed.PeerURL}} {
		if fl.Changed(u.flag) {
			continue
		}
		p, err := url.Parse(*u.url)
		if err != nil {
			return err
		}
		if free(p.Host) {
			continue
		}
		ln, port, err := reservePort(p.Hostname())
		if err != nil {
			return fmt.Errorf("--%s: %s is taken and no free port was found: %w", u.flag, p.Host, err)
		}
		held = append(held, ln)
		was := p.Host
		p.Host = net.JoinHostPort(p.Hostname(), port)
		*u.url = p.String()
		fmt.Fprintf(out, "ccattler dev: %s is taken (another dev or server?); --%s %s instead\n", was, u.flag, *u.url)
	}
	cfg.Ops.AdminAddr = o.admin
	if o.admin != "" && !fl.Changed("admin-addr") && !free(o.admin) {
		host, _, err := net.SplitHostPort(o.admin)
		if err != nil {
			return err
		}
		ln, port, err := reservePort(host)
		if err != nil {
			return fmt.Errorf("--admin-addr: %s is taken and no free port was found: %w", o.admin, err)
		}
		held = append(held, ln)
		cfg.Ops.AdminAddr = net.JoinHostPort(host, port)
		fmt.Fprintf(out, "ccattler dev: %s is taken; --admin-addr %s instead\n", o.admin, cfg.Ops.AdminAddr)
	}
	// The address is dev's own now (given, or found free): failing to
	// listen on it is an error, not a warning.
	cfg.Ops.adminRequired = func() bool { return true }
	if o.watch != "" {
		if cfg.Policies != "" && cfg.Policies != o.watch {
			return usageError("--watch %s and --policies %s: --watch DIR runs DIR's rules already; give one of them", o.watch, cfg.Policies)
		}
		cfg.Policies, cfg.Ops.Watch = o.watch, true
	}
	return nil
}

// free says whether host:port can be listened on now.
func free(hostport string) bool {
	ln, err := net.Listen("tcp", hostport)
	if err != nil {
		return false
	}
	ln.Close()
	return true
}

// reservePort asks the kernel for a free port on host and holds it until
// the listener returned is closed: ports asked for one after another, each
// closed before the next, may come back the same (a bench once got one
// port for etcd's client and peer URLs).
func reservePort(host string) (net.Listener, string, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return nil, "", err
	}
	_, port, err := net.SplitHostPort(ln.Addr().String())
	if err != nil {
		ln.Close()
		return nil, "", err
	}
	return ln, port, nil
}

// devContextName is the context dev writes: "dev" on etcd's default port,
// dev-PORT on another, so that two devs side by side keep one each.
func devContextName(clientURL string) string {
	if clientURL == defaultEtcdPlain {
		return "dev"
	}
	if p, err := url.Parse(clientURL); err == nil && p.Port() != "" {
		return "dev-" + p.Port()
	}
	return "dev"
}

// writeDevContext adds dev's context to the client configuration and makes
// it current, so that commands in another terminal reach this dev with no
// flags. The returned function undoes it at exit: the context goes, and the
// current context is the one before, unless someone changed either since.
func writeDevContext(clientURL, root string, out io.Writer) (undo func(), err error) {
	path, err := configPath()
	if err != nil {
		return func() {}, err
	}
	name := devContextName(clientURL)
	c := clientContext{Name: name, Etcd: []string{clientURL}}
	if root != "" && root != facts.DefaultRoot {
		c.Root = root
	}
	var previous string
	err = editClientConfig(path, func(cfg *clientConfig, body *hclwrite.Body) error {
		previous = cfg.CurrentContext
		if previous == name {
			previous = ""
		}
		setContextBlock(body, c)
		setCurrentContext(body, name)
		return nil
	})
	if err != nil {
		return func() {}, err
	}
	fmt.Fprintf(out, "ccattler dev: context %s (etcd %s) written to %s and made current: other commands reach this dev with no flags (or CCATTLER_CONTEXT=%s)\n",
		name, clientURL, path, name)
	return func() {
		_ = editClientConfig(path, func(cfg *clientConfig, body *hclwrite.Body) error {
			if now := cfg.find(name); now == nil || strings.Join(now.Etcd, ",") != clientURL {
				return nil // replaced by someone else since: theirs now
			}
			removeContextBlock(body, name)
			if cfg.CurrentContext == name {
				if previous != "" && cfg.find(previous) != nil {
					setCurrentContext(body, previous)
				} else {
					setCurrentContext(body, "")
				}
			}
			return nil
		})
	}, nil
}

// devAdminNote names the admin endpoint in dev's banner.
func devAdminNote(ops opsConfig) string {
	if ops.AdminAddr == "" {
		return ""
	}
	return " console http://" + ops.AdminAddr + "/ui/, metrics http://" + ops.AdminAddr + "/metrics,"
}
