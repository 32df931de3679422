package spec

import (
	"bytes"
	"strings"
	"testing"

	"github.com/ccattler/ccattler/facts"
	"github.com/hashicorp/hcl/v2"
)

func decodeOne(t *testing.T, name, src string) (*Doc, []string) {
	t.Helper()
	doc, diags := Decode(Source{Name: name, Bytes: []byte(src)})
	var msgs []string
	for _, d := range diags {
		msgs = append(msgs, DiagString(d))
	}
	return doc, msgs
}

func factMap(fs []Fact) map[string]string {
	m := map[string]string{}
	for _, f := range fs {
		m[f.Key] = string(f.Value)
	}
	return m
}

func TestDecodeSeedExample(t *testing.T) {
	doc, msgs := decodeOne(t, "web.hcl", `
service "web" {
  image     = "nginx:1.28"
  instances = 3
  expose    = [8080]
}
`)
	if len(msgs) > 0 {
		t.Fatalf("unexpected diagnostics: %v", msgs)
	}
	want := map[string]string{
		"desired/service/web":               `{}`,
		"desired/service/web/image":         `"nginx:1.28"`,
		"desired/service/web/instances":     `3`,
		"desired/service/web/expose/8080":   `{}`,
		"intent/user/service/web/instances": `3`,
	}
	assertFacts(t, doc.Facts(), want)
}

func assertFacts(t *testing.T, got []Fact, want map[string]string) {
	t.Helper()
	gm := factMap(got)
	for k, v := range want {
		if gm[k] != v {
			t.Errorf("%s = %q, want %q", k, gm[k], v)
		}
	}
	for k, v := range gm {
		if _, ok := want[k]; !ok {
			t.Errorf("unexpected fact %s = %s", k, v)
		}
	}
}

func TestDecodeEveryAttribute(t *testing.T) {
	doc, msgs := decodeOne(t, "full.hcl", `
service "web" {
  image     = "nginx:1.28"
  instances = 3
  expose    = [8080, 8443]
  resources { cpu = 0.5  memory = "256Mi" }
  health    { method = "GET"  path = "/healthz"  interval = "10s" }
  autoscale { metric = "cpu"  threshold = 0.7  min = 2  max = 10 }
  placement { architecture = "amd64"  zone = "eu-1a" }
  update    { max_unavailable = 1  max_extra = 1 }
}
volume "data" { size = "10Gi"  persistent = true  access_mode = "single-node" }
service "api" {
  image     = "api:2"
  resources { cpu = "250m"  memory = 1073741824 }
  command   = ["/bin/api", "--serve"]
  args      = ["-v"]
  env       = { GREETING = "hello", "LOG_LEVEL" = "debug" }
  labels    = { team = "core" }
  restart   { attempts = 2  delay = "2s"  max_delay = "1m"  interval = "30m" }
}
`)
	// api sets no count: a warning, not an error (ccattler scale sets one).
	if len(msgs) != 1 || msgs[0] != `full.hcl:13:9: No instances: Service "api" sets neither instances nor autoscale, so none of its instances runs until ccattler scale service api N sets a count. Add instances = 1 (or how many) to run it.` {
		t.Fatalf("diagnostics: %v; want the warning that api runs no instance", msgs)
	}
	want := map[string]string{
		"desired/service/web":                        `{}`,
		"desired/service/web/image":                  `"nginx:1.28"`,
		"desired/service/web/instances":              `3`,
		"desired/service/web/expose/8080":            `{}`,
		"desired/service/web/expose/8443":            `{}`,
		"desired/service/web/resources/cpu":          `0.5`,
		"desired/service/web/resources/memory":       `"256Mi"`,
		"desired/service/web/health/method":          `"GET"`,
		"desired/service/web/health/path":            `"/healthz"`,
		"desired/service/web/health/interval":        `"10s"`,
		"desired/service/web/autoscale/metric":       `"cpu"`,
		"desired/service/web/autoscale/threshold":    `0.7`,
		"desired/service/web/autoscale/min":          `2`,
		"desired/service/web/autoscale/max":          `10`,
		"desired/service/web/placement/architecture": `"amd64"`,
		"desired/service/web/placement/zone":         `"eu-1a"`,
		"desired/service/web/update/max_unavailable": `1`,
		"desired/service/web/update/max_extra":       `1`,
		"intent/user/service/web/instances":          `3`,
		"desired/volume/data":                        `{}`,
		"desired/volume/data/size":                   `"10Gi"`,
		"desired/volume/data/persistent":             `true`,
		"desired/volume/data/access_mode":            `"single-node"`,
		"desired/service/api":                        `{}`,
		"desired/service/api/image":                  `"api:2"`,
		"desired/service/api/command":                `["/bin/api", "--serve"]`,
		"desired/service/api/args":                   `["-v"]`,
		"desired/service/api/env/GREETING":           `"hello"`,
		"desired/service/api/env/LOG_LEVEL":          `"debug"`,
		"desired/service/api/labels/team":            `"core"`,
		// Pinned: another digest for the same file would replace every
		// instance of such a service on upgrade.
		"desired/service/api/spec_digest":       `"2f5fe11ad9e492f8"`,
		"desired/service/api/restart/attempts":  `2`,
		"desired/service/api/restart/delay":     `"2s"`,
		"desired/service/api/restart/max_delay": `"1m"`,
		"desired/service/api/restart/interval":  `"30m"`,
		"desired/service/api/resources/cpu":     `0.25`,
		"desired/service/api/resources/memory":  `"1Gi"`,
	}
	assertFacts(t, doc.Facts(), want)
	// Every rendered fact is a valid fact of the schema.
	for _, f := range doc.Facts() {
		if _, err := facts.Default.Validate(f.Key, f.Value); err != nil {
			t.Errorf("rendered fact does not validate: %v", err)
		}
	}
	if got := []string{doc.Objects[0].Name, doc.Objects[1].Name, doc.Objects[2].Name}; strings.Join(got, ",") != "web,data,api" {
		t.Errorf("objects in order %v, want file order web,data,api", got)
	}
}

// TestDecodeBadInput pins the exact position and message of every kind of
// mistake a file can hold.
func TestDecodeBadInput(t *testing.T) {
	long := strings.Repeat("a", 64)
	cases := []struct {
		name string
		src  string
		want []string
	}{
		{"syntax error", "service \"web\" {\n  image = = \"x\"\n}\n",
			[]string{`f.hcl:2:11: Invalid expression: Expected the start of an expression, but found an invalid expression token.`}},
		{"bad memory in a one-line block", "service \"web\" {\n  resources { cpu = 0.5  memory = \"12XB\" }\n}\n",
			[]string{`f.hcl:2:35: Invalid value for "memory": "memory" expects a memory quantity such as "256Mi", "1Gi" or "512" (bytes), but got "12XB".`}},
		{"unknown attribute on one line", "service \"web\" { instances = 1  imge = \"x\" }\n",
			[]string{`f.hcl:1:32: Unsupported argument: An argument named "imge" is not expected here. Did you mean "image"?`}},
		{"missing brace", "service \"web\" {\n  image = \"x\"\n",
			[]string{`f.hcl:1:15: Unclosed configuration block: There is no closing brace for this block before the end of the file. This may be caused by incorrect brace nesting elsewhere in this file.`}},
		{"unknown attribute", "service \"web\" {\n  imag = \"nginx:1.28\"\n}\n",
			[]string{`f.hcl:2:3: Unsupported argument: An argument named "imag" is not expected here. Did you mean "image"?`}},
		{"unknown nested attribute", "service \"web\" {\n  resources { memroy = \"1Gi\" }\n}\n",
			[]string{`f.hcl:2:15: Unsupported argument: An argument named "memroy" is not expected here. Did you mean "memory"?`}},
		{"unknown block", "service \"web\" {\n  heath { path = \"/\" }\n}\n",
			[]string{`f.hcl:2:3: Unsupported block type: Blocks of type "heath" are not expected here. Did you mean "health"?`}},
		{"unknown top-level block", "servce \"web\" {}\n",
			[]string{`f.hcl:1:1: Unsupported block type: Blocks of type "servce" are not expected here. Did you mean "service"?`}},
		{"negative instances", "service \"web\" {\n  instances = -1\n}\n",
			[]string{`f.hcl:2:15: Invalid value for "instances": "instances" expects an integer from 0 to 10000, but got -1.`}},
		{"fractional instances", "service \"web\" {\n  instances = 1.5\n}\n",
			[]string{`f.hcl:2:15: Invalid value for "instances": "instances" expects an integer from 0 to 10000, but got 1.5.`}},
		{"string instances", "service \"web\" {\n  instances = \"3\"\n}\n",
			[]string{`f.hcl:2:15: Invalid value for "instances": "instances" expects an integer from 0 to 10000, but got "3".`}},
		{"bad memory", "service \"web\" {\n  resources { memory = \"12XB\" }\n}\n",
			[]string{`f.hcl:2:24: Invalid value for "memory": "memory" expects a memory quantity such as "256Mi", "1Gi" or "512" (bytes), but got "12XB".`}},
		{"bad cpu", "service \"web\" {\n  resources { cpu = -1 }\n}\n",
			[]string{`f.hcl:2:21: Invalid value for "cpu": "cpu" expects a cpu quantity in cores, such as 0.5 or "500m" >= 0, but got -1.`}},
		{"bad method", "service \"web\" {\n  health { method = \"POST\" }\n}\n",
			[]string{`f.hcl:2:21: Invalid value for "method": "method" expects one of GET|HEAD|TCP, but got "POST".`}},
		{"bad duration", "service \"web\" {\n  health { interval = \"10 seconds\" }\n}\n",
			[]string{`f.hcl:2:23: Invalid value for "interval": "interval" expects a duration such as "10s" or "1m30s", but got "10 seconds".`}},
		{"bad access mode", "volume \"data\" { access_mode = \"shared\" }\n",
			[]string{`f.hcl:1:31: Invalid value for "access_mode": "access_mode" expects one of single-node|multi-node, but got "shared".`}},
		{"min greater than max", "service \"web\" {\n  autoscale {\n    min = 5\n    max = 2\n  }\n}\n",
			[]string{`f.hcl:3:11: Invalid autoscale range: autoscale min (5) is greater than max (2): min must be at most max.`}},
		{"port too large", "service \"web\" {\n  expose = [8080, 70000]\n}\n",
			[]string{`f.hcl:2:19: Invalid port: Each port in "expose" must be an integer from 1 to 65535, but got 70000.`}},
		{"port zero", "service \"web\" {\n  expose = [0]\n}\n",
			[]string{`f.hcl:2:13: Invalid port: Each port in "expose" must be an integer from 1 to 65535, but got 0.`}},
		{"duplicate port", "service \"web\" {\n  expose = [80, 80]\n}\n",
			[]string{`f.hcl:2:17: Duplicate port: Port 80 is listed more than once in "expose".`}},
		{"expose not a list", "service \"web\" {\n  expose = 8080\n}\n",
			[]string{`f.hcl:2:12: Invalid value for "expose": "expose" expects a list of port numbers from 1 to 65535, such as [8080, 8443].`}},
		{"name with slash", "service \"we/b\" {}\n",
			[]string{`f.hcl:1:9: Invalid service name: The service name becomes a key segment (desired/service/{name}): "we/b" is not a valid name: expected 1-63 lowercase letters, digits or '-', starting and ending with a letter or digit.`}},
		{"empty name", "volume \"\" {}\n",
			[]string{`f.hcl:1:8: Invalid volume name: The volume name becomes a key segment (desired/volume/{name}): "" is not a valid name: expected 1-63 lowercase letters, digits or '-', starting and ending with a letter or digit.`}},
		{"name too long", "service \"" + long + "\" {}\n",
			[]string{`f.hcl:1:9: Invalid service name: The service name becomes a key segment (desired/service/{name}): "` + long + `" is not a valid name: expected 1-63 lowercase letters, digits or '-', starting and ending with a letter or digit.`}},
		{"duplicate service in one file", "service \"web\" {\n  image = \"x:1\"\n  instances = 1\n}\nservice \"web\" { image = \"x:1\" }\n",
			[]string{`f.hcl:5:9: Duplicate service "web": A service named "web" is already declared at f.hcl:1:9. Each name may be declared once across all the files applied together.`}},
		{"duplicate block", "service \"web\" {\n  update { max_extra = 1 }\n  update { max_extra = 2 }\n}\n",
			[]string{`f.hcl:3:3: Duplicate update block: A service may have one update block; the first is at f.hcl:2:3.`}},
		{"missing image", "service \"web\" {\n  instances = 3\n}\n",
			[]string{`f.hcl:1:9: Missing image: Service "web" has no image, so no instance of it could start. Add the image its instances run, e.g. image = "nginx:1.28".`}},
		{"command not a list", "service \"web\" {\n  image = \"x:1\"\n  command = \"echo hi\"\n}\n",
			[]string{`f.hcl:3:13: Invalid value for "command": "command" expects a list of strings such as ["/bin/sh", "-c", "echo hello"], but got "echo hi".`}},
		{"args with a number", "service \"web\" {\n  image = \"x:1\"\n  args = [\"-n\", 3]\n}\n",
			[]string{`f.hcl:3:10: Invalid value for "args": "args" expects a list of strings such as ["/bin/sh", "-c", "echo hello"], but got a tuple.`}},
		{"env name with a dash", "service \"web\" {\n  image = \"x:1\"\n  env = { \"MY-VAR\" = \"1\" }\n}\n",
			[]string{`f.hcl:3:11: Invalid name: "MY-VAR" is not a valid name in "env": expected letters, digits and '_' (labels also '.', ':' and '-'), at most 128 characters, not starting with a digit.`}},
		{"env value a number", "service \"web\" {\n  image = \"x:1\"\n  env = { PORT2 = 8081 }\n}\n",
			[]string{`f.hcl:3:19: Invalid value: The value of "PORT2" in "env" must be a string, but got 8081; quote it (e.g. "8080").`}},
		{"env not a map", "service \"web\" {\n  image = \"x:1\"\n  env = [\"A=1\"]\n}\n",
			[]string{`f.hcl:3:9: Invalid value for "env": "env" expects a map of names to strings, such as { GREETING = "hello" }.`}},
		{"bad restart delay", "service \"web\" {\n  image = \"x:1\"\n  restart { delay = \"soon\" }\n}\n",
			[]string{`f.hcl:3:21: Invalid value for "delay": "delay" expects a duration such as "10s" or "1m30s", but got "soon".`}},
		{"missing label", "service {}\n",
			[]string{`f.hcl:1:9: Missing name for service: All service blocks must have 1 labels (name).`}},
		{"variable reference", "service \"web\" {\n  image = nginx\n}\n",
			[]string{`f.hcl:2:11: Variables not allowed: Variables may not be used here.`}},
		{"every problem at once", "service \"web\" {\n  instances = -2\n  expose = [99999]\n  resources { memory = \"12XB\" }\n}\nvolume \"Data\" {}\n",
			[]string{
				`f.hcl:2:15: Invalid value for "instances": "instances" expects an integer from 0 to 10000, but got -2.`,
				`f.hcl:3:13: Invalid port: Each port in "expose" must be an integer from 1 to 65535, but got 99999.`,
				`f.hcl:4:24: Invalid value for "memory": "memory" expects a memory quantity such as "256Mi", "1Gi" or "512" (bytes), but got "12XB".`,
				`f.hcl:6:8: Invalid volume name: The volume name becomes a key segment (desired/volume/{name}): "Data" is not a valid name: expected 1-63 lowercase letters, digits or '-', starting and ending with a letter or digit.`,
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			doc, msgs := decodeOne(t, "f.hcl", tc.src)
			if strings.Join(msgs, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("diagnostics:\n%s\nwant:\n%s", strings.Join(msgs, "\n"), strings.Join(tc.want, "\n"))
			}
			if doc.Files["f.hcl"] == nil {
				t.Errorf("the file is missing from Doc.Files, so its diagnostics cannot show source")
			}
		})
	}
}

func TestDecodeDuplicateAcrossFiles(t *testing.T) {
	_, diags := Decode(
		Source{Name: "a.hcl", Bytes: []byte("service \"web\" {\n  image = \"x:1\"\n  instances = 1\n}\n")},
		Source{Name: "b.hcl", Bytes: []byte("volume \"web\" {}\n\nservice \"web\" { image = \"x:1\" }\n")},
	)
	if len(diags) != 1 {
		t.Fatalf("want one diagnostic, got %v", diags)
	}
	want := `b.hcl:3:9: Duplicate service "web": A service named "web" is already declared at a.hcl:1:9. Each name may be declared once across all the files applied together.`
	if got := DiagString(diags[0]); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

func TestWriteDiagnosticsShowsSourceAndCaret(t *testing.T) {
	src := "service \"web\" {\n\tinstances = -1\n}\n"
	doc, diags := Decode(Source{Name: "web.hcl", Bytes: []byte(src)})
	var b bytes.Buffer
	if err := WriteDiagnostics(&b, doc.Files, diags); err != nil {
		t.Fatal(err)
	}
	want := "web.hcl:2:14: error: Invalid value for \"instances\"\n" +
		"    2 | \tinstances = -1\n" +
		"      | \t            ^^\n" +
		"  \"instances\" expects an integer from 0 to 10000, but got -1.\n\n"
	if b.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", b.String(), want)
	}
}

// A service the autoscaler counts needs no instances; one nobody counts is
// valid, with a warning, and writes no intent.
func TestDecodeServiceWithoutInstances(t *testing.T) {
	doc, diags := Decode(Source{Name: "f.hcl", Bytes: []byte(`service "auto" {
  image     = "x:1"
  autoscale { metric = "cpu"  threshold = 0.5  min = 1  max = 4 }
}
service "idle" {
  image = "x:1"
}
`)})
	if diags.HasErrors() || len(diags) != 1 || diags[0].Severity != hcl.DiagWarning || DiagString(diags[0]) !=
		`f.hcl:5:9: No instances: Service "idle" sets neither instances nor autoscale, so none of its instances runs until ccattler scale service idle N sets a count. Add instances = 1 (or how many) to run it.` {
		t.Fatalf("diagnostics: %v; want one warning, for idle", diags)
	}
	for _, f := range doc.Facts() {
		if strings.HasPrefix(f.Key, "intent/") {
			t.Errorf("a service without instances wrote %s", f.Key)
		}
	}
}
