package hclcheck_test

import (
	"fmt"
	"strings"

	"github.com/ccattler/ccattler/facts/hclcheck"
)

func ExampleSource() {
	src := "service \"web\" {\n  instances = " + strings.Repeat("[", 100000) + "\n}\n"
	for _, d := range hclcheck.Source("web.hcl", []byte(src)) {
		fmt.Printf("%s:%d:%d: %s\n", d.Subject.Filename, d.Subject.Start.Line, d.Subject.Start.Column, d.Summary)
	}
	fmt.Println(len(hclcheck.Source("ok.hcl", []byte("service \"web\" {\n  expose = [8080]\n}\n"))))
	// Output:
	// web.hcl:2:114: File nests deeper than 100 levels (MaxNestingDepth)
	// 0
}
