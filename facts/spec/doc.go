// Package spec reads the service and volume files users write and turns them
// into the desired facts of the key schema.
//
// A file declares services and volumes in HCL:
//
//	service "web" {
//	  image     = "nginx:1.28"
//	  instances = 3
//	  expose    = [8080]
//	  resources { cpu = 0.5  memory = "256Mi" }
//	}
//	volume "data" { size = "10Gi"  persistent = true  access_mode = "single-node" }
//
// Several attributes may share the line of a small block, as above; plain
// HCL wants one per line, so the decoder adds the line breaks before parsing
// and maps every position back to the file as written (oneline.go).
//
// Decode parses one or more files and reports every problem at once as
// hcl.Diagnostics, each naming file:line:col. A valid service renders to the
// exact set of facts the key schema names: desired/service/web -> {},
// desired/service/web/image -> "nginx:1.28", desired/service/web/expose/8080 -> {},
// and intent/user/service/web/instances -> 3 next to desired/service/web/instances.
// Only attributes present in the file produce facts, and every value is
// encoded by the fact's schema type, so what is stored is canonical.
//
// Apply makes the store hold exactly those facts for the services and volumes
// the files name, in one transaction guarded by the revisions it read:
//
//	srcs, err := spec.ReadFiles([]string{"examples/web.hcl"})
//	doc, diags := spec.Decode(srcs...)
//	if diags.HasErrors() {
//		spec.WriteDiagnostics(os.Stderr, doc.Files, diags)
//		return
//	}
//	res, err := spec.Apply(ctx, store, doc, spec.Options{})
//	for _, c := range res.Changes {
//		fmt.Println(c) // + desired/service/web/image = "nginx:1.28"
//	}
//
// Re-applying an unchanged file writes nothing; a fact whose attribute was
// removed from the file (a port no longer exposed) is deleted; DryRun returns
// the difference without writing. Delete removes a service's or volume's
// desired facts and user intent in one transaction.
package spec
