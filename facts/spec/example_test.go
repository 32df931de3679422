package spec_test

import (
	"fmt"
	"os"

	"github.com/ccattler/ccattler/facts/spec"
)

func ExampleDecode() {
	src := []byte(`
service "web" {
  image     = "nginx:1.28"
  instances = 3
  expose    = [8080]
  resources { cpu = "500m"  memory = "256Mi" }
}
`)
	doc, diags := spec.Decode(spec.Source{Name: "web.hcl", Bytes: src})
	if diags.HasErrors() {
		spec.WriteDiagnostics(os.Stderr, doc.Files, diags)
		return
	}
	for _, f := range doc.Facts() {
		fmt.Printf("%s -> %s\n", f.Key, f.Value)
	}
	// Output:
	// desired/service/web -> {}
	// desired/service/web/expose/8080 -> {}
	// desired/service/web/image -> "nginx:1.28"
	// desired/service/web/instances -> 3
	// desired/service/web/resources/cpu -> 0.5
	// desired/service/web/resources/memory -> "256Mi"
	// intent/user/service/web/instances -> 3
}

func ExampleWriteDiagnostics() {
	src := []byte("service \"web\" {\n  instances = -1\n  resources { cpu = 0.5  memory = \"12XB\" }\n}\n")
	doc, diags := spec.Decode(spec.Source{Name: "web.hcl", Bytes: src})
	spec.WriteDiagnostics(os.Stdout, doc.Files, diags)
	// Output:
	// web.hcl:2:15: error: Invalid value for "instances"
	//     2 |   instances = -1
	//       |               ^^
	//   "instances" expects an integer from 0 to 10000, but got -1.
	//
	// web.hcl:3:35: error: Invalid value for "memory"
	//     3 |   resources { cpu = 0.5  memory = "12XB" }
	//       |                                   ^^^^^^
	//   "memory" expects a memory quantity such as "256Mi", "1Gi" or "512" (bytes), but got "12XB".
}
