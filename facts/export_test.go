package facts

// Backlog is how many watch answers wait in the mirror's queue, beside the
// one applyEvents may hold while it waits for the lock.
func (m *Mirror) Backlog() int {
	if in := m.backlog.Load(); in != nil {
		return len(*in)
	}
	return 0
}
