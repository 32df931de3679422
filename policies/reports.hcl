# Only the engine writes event/ (DESIGN §6), so no node forges a firing record: an
# agent reports trouble in facts it may write, and a rule's firing over them is the event.
rule "record_cache_error" {
  doc       = "A node agent that could not read its local cache reports why in observed/node/{node}/cache_error; this records it (the firing is the event, with the reason in its bindings) and removes the report."
  principal = "failure"
  match { problem = "observed/node/{node}/cache_error" }
  delete "observed/node/{node}/cache_error" {}
}
