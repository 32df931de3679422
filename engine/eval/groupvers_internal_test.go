package eval

import "testing"

// A read is stamped with the bucket of its group key in lookup's buffer
// (groupBucketOf), and a change bumps the bucket of the key as a string
// (groupBucket): if the two ever differed, a change would miss the stamps
// of the reads it makes stale.
func TestGroupBucketOfBytesIsTheStrings(t *testing.T) {
	for _, k := range []string{"", "node-1", "node-1\x00svc-00001", "\x00\x00", "svc-01\x00zone-1\x00amd64"} {
		if got, want := groupBucketOf([]byte(k)), groupBucket(k); got != want {
			t.Errorf("%q: groupBucketOf %d, groupBucket %d", k, got, want)
		}
	}
}
