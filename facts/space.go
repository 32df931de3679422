package facts

import (
	"context"
	"errors"
	"fmt"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// ErrNoSpace is the error of a write while etcd's backend is over its
// quota (etcd's NOSPACE alarm): etcd takes reads, deletes and compactions
// then, no puts, until the alarm is disarmed. Test for it with errors.Is.
var ErrNoSpace = rpctypes.ErrNoSpace

// DefragTimeout bounds the defragmentation of one member: it rewrites the
// member's whole backend file, a few seconds a GiB, and the member answers
// nothing else meanwhile.
const DefragTimeout = 2 * time.Minute

// SpaceAlarmed reports whether any member has raised etcd's NOSPACE alarm.
func (s *Store) SpaceAlarmed(ctx context.Context) (bool, error) {
	resp, err := s.Client.AlarmList(ctx)
	if err != nil {
		return false, fmt.Errorf("list etcd's alarms: %w", err)
	}
	for _, a := range resp.Alarms {
		if a.Alarm == pb.AlarmType_NOSPACE {
			return true, nil
		}
	}
	return false, nil
}

// RecoverSpace brings etcd back from its NOSPACE alarm, as etcd's
// maintenance guide says to, once history is compacted: it defragments
// every member the store reaches (compaction frees pages in the backend
// file, defragmentation gives them back, so the file falls under the
// quota) and then disarms the alarm. It does nothing when no alarm is
// raised, and reports whether it disarmed one. Like Compact it needs
// etcd's root user.
func (s *Store) RecoverSpace(ctx context.Context) (bool, error) {
	alarmed, err := s.SpaceAlarmed(ctx)
	if err != nil || !alarmed {
		return false, err
	}
	var errs []error
	for _, ep := range s.Client.Endpoints() {
		dctx, cancel := context.WithTimeout(ctx, DefragTimeout)
		_, err := s.Client.Defragment(dctx, ep)
		cancel()
		if err != nil {
			errs = append(errs, fmt.Errorf("defragment the etcd member at %s: %w", ep, err))
		}
	}
	if len(errs) > 0 {
		return false, errors.Join(errs...)
	}
	resp, err := s.Client.AlarmList(ctx)
	if err != nil {
		return false, fmt.Errorf("list etcd's alarms: %w", err)
	}
	for _, a := range resp.Alarms {
		if a.Alarm != pb.AlarmType_NOSPACE {
			continue
		}
		if _, err := s.Client.AlarmDisarm(ctx, (*clientv3.AlarmMember)(a)); err != nil {
			return false, fmt.Errorf("disarm etcd's NOSPACE alarm of member %x: %w", a.MemberID, err)
		}
	}
	return true, nil
}
