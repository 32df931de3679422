# What agents report about trouble is recorded by the engine, not by the
# agents: only the engine writes event/ (DESIGN §6), so a node cannot forge a
# firing record. An agent puts the details into facts it may write (an
# instance's reason and exit_status, health.hcl's note_failed records those;
# its node's cache_error, below); a rule reads them, and its firing, with
# the facts as bindings, is the event `ccattler events` shows.
rule "record_cache_error" {
  doc       = "A node agent that could not read its local cache reports why in observed/node/{node}/cache_error; this records it (the firing is the event, with the reason in its bindings) and removes the report."
  principal = "failure"
  match { problem = "observed/node/{node}/cache_error" }
  delete "observed/node/{node}/cache_error" {}
}
