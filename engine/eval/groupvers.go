package eval

import (
	"hash/maphash"

	"github.com/ccattler/ccattler/rules"
)

// Group versions. A candidate's kept outcome (candmemo.go) is served again
// when every aggregate it read still has the value it read, and looking
// each one up again to compare was most of what serving cost: a group key
// built and hashed, a map probed (at 100,000 instances often a cache miss),
// for each aggregate of each of the 64 nodes sampled for each instance.
//
// The round's cached groups are the truth for the round (roundAggs.lookup
// answers from them first), so a group's value changes only where the
// round changes its entry: a group adjusted to another value, created or
// dropped. Each such change bumps a version kept for the group's bucket (its
// key hashed into groupBuckets); a change the round cannot name a group for
// (an aggregate's groups dropped, computed at once, no longer whole) bumps
// the aggregate's epoch. A read noted with the version and epoch it saw
// still has its value while both are unchanged.
//
// Only a group named by the candidate alone is noted (a node's used cpu):
// the candidate stands for the same values wherever its outcome is served,
// while an outcome is served under other outer values too (another
// service's instance, whose `siblings` on the node is another group with
// the same count), and those groups are looked up as before.
//
// Versions are the round's own, as its candidates' outcomes are.

// groupBuckets is how many buckets an aggregate's group keys hash into: a
// placement bumps one bucket of each count it changes, and the reads of
// the other nodes' groups, one in 4,096 aside, stay good.
const groupBuckets = 4096

// groupVers is one aggregate's versions in a round.
type groupVers struct {
	epoch uint32
	b     [groupBuckets]uint32
}

// groupStamp is what a read of one group saw: its aggregate (aggInfo.seq;
// -1: not noted), its bucket, and the versions then.
type groupStamp struct {
	seq   int32
	b     uint16
	epoch uint32
	ver   uint32
}

var groupSeed = maphash.MakeSeed()

func groupBucket(gk string) uint16 {
	return uint16(maphash.String(groupSeed, gk) % groupBuckets)
}

// groupBucketOf is groupBucket of a key in a buffer: maphash gives a
// string and its bytes the same hash, so the same bucket.
func groupBucketOf(gk []byte) uint16 {
	return uint16(maphash.Bytes(groupSeed, gk) % groupBuckets)
}

// versOf returns info's versions, begun when create is set (nil else when
// not begun: no read of it was noted this round, so a change has no one
// to tell).
func (ra *roundAggs) versOf(info *aggInfo, create bool) *groupVers {
	if info.seq >= len(ra.vers) {
		if !create {
			return nil
		}
		ra.vers = append(ra.vers, make([]*groupVers, info.seq+1-len(ra.vers))...)
	}
	v := ra.vers[info.seq]
	if v == nil && create {
		v = &groupVers{}
		ra.vers[info.seq] = v
	}
	return v
}

// bumpGroup notes a change of info's group gk.
func (ra *roundAggs) bumpGroup(info *aggInfo, gk string) {
	if v := ra.versOf(info, false); v != nil {
		v.b[groupBucket(gk)]++
	}
}

// bumpAll notes a change of ag's groups the round cannot name.
func (ra *roundAggs) bumpAll(ag *rules.Aggregate) {
	if info := ra.a.info[ag]; info != nil {
		if v := ra.versOf(info, false); v != nil {
			v.epoch++
		}
	}
}

// stampOf is the stamp of a read of ag's group under b just looked up:
// the group is held then, or the aggregate whole and the group empty, and
// whatever changes it bumps its version. A group b names by an outer value
// (one of its first outer names) is not stamped (seq -1): an outcome is
// served under other outer values, which name other groups.
func (ra *roundAggs) stampOf(ag *rules.Aggregate, b *binding, outer int) groupStamp {
	info := ra.a.info[ag]
	if info == nil {
		return groupStamp{seq: -1}
	}
	for _, name := range info.group {
		if i := b.index(name); i >= 0 && i < outer {
			return groupStamp{seq: -1}
		}
	}
	ra.gkBuf = appendGroupKey(ra.gkBuf[:0], info, b)
	bk := groupBucketOf(ra.gkBuf)
	v := ra.versOf(info, true)
	return groupStamp{seq: int32(info.seq), b: bk, epoch: v.epoch, ver: v.b[bk]}
}

// unchanged reports whether no change has touched the group st was taken
// of (nor another of its bucket) since.
func (ra *roundAggs) unchanged(st groupStamp) bool {
	if st.seq < 0 || int(st.seq) >= len(ra.vers) {
		return false
	}
	v := ra.vers[st.seq]
	return v != nil && v.epoch == st.epoch && v.b[st.b] == st.ver
}
