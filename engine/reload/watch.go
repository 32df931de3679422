package reload

import (
	"context"
	"time"
)

// watchDir polls the rule files of Dir every Poll and reloads once a change
// has held still for one poll: an editor that writes a file in several
// steps, or a copy of several files, causes one reload, not one per step.
// Polling the files' contents needs no platform notification API and sees
// a change whatever the file system's timestamp resolution.
func (r *Reloader) watchDir(ctx context.Context) {
	last := r.Status().Version // what runs; a change before Run started is seen at the first poll
	pending := ""
	t := time.NewTicker(r.cfg.Poll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		fp := r.fingerprint()
		switch {
		case fp != last:
			last, pending = fp, fp // changed: wait one more poll for it to settle
		case pending != "":
			pending = ""
			r.Reload(ctx, "watch", "")
		}
	}
}

// fingerprint is the version hash of the directory's rule files now, or a
// description of why they cannot be read (which changes when they can).
func (r *Reloader) fingerprint() string {
	srcs, diags := ReadDir(r.cfg.Dir)
	if diags.HasErrors() {
		return "unreadable: " + diags.Error()
	}
	return Version(srcs)
}
