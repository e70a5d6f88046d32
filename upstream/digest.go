package upstream

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
)

// DEBUG DIGEST in front of a cluster: the digest of the whole data set, as one server holding
// every master's keys would compute it. Redis's digest of a server is, for each database with
// keys, mix(0, the database's number) XORed with a digest of each key and its value (debug.c,
// computeDatasetDigest); a master of a cluster has database 0 only, and an empty one answers
// forty zeros. So one server's digest is the XOR of the masters' that have keys, with
// mix(0, 0) XORed in again once for every master past the first (each of theirs has it too).

// emptyDigest is a server with no keys' digest.
const emptyDigest = "0000000000000000000000000000000000000000"

// mixZero is Redis's mixDigest of a zero digest with database 0's number (4 zero bytes):
// SHA1 of the zero digest XORed with SHA1 of the number.
var mixZero = func() [20]byte {
	h := sha1.Sum([]byte{0, 0, 0, 0})
	return sha1.Sum(h[:])
}()

// combineDigests is the digest of the data set of the servers whose digests (hex, as DEBUG
// DIGEST answers) are given, as one server holding all their keys in database 0; ok false
// for one that is not a digest.
func combineDigests(digests []string) (string, bool) {
	var out [20]byte
	n := 0
	for _, d := range digests {
		var b [20]byte
		if len(d) != 40 {
			return "", false
		}
		if _, err := hex.Decode(b[:], []byte(d)); err != nil {
			return "", false
		}
		if d == emptyDigest {
			continue
		}
		for i := range out {
			out[i] ^= b[i]
		}
		n++
	}
	if n == 0 {
		return emptyDigest, true
	}
	if n%2 == 0 {
		for i := range out {
			out[i] ^= mixZero[i]
		}
	}
	return hex.EncodeToString(out[:]), true
}

// debugDigest answers DEBUG DIGEST from every master's, combined; a master's error, or a
// reply that is not a digest, is the answer as it came.
func (c *Cluster) debugDigest(ctx context.Context, args [][]byte) []byte {
	_, replies, err := c.OnEveryMaster(ctx, args)
	if err != nil {
		return unavailable(err)
	}
	digests := make([]string, len(replies))
	for i, r := range replies {
		if len(r) != 43 || r[0] != '+' {
			return r
		}
		digests[i] = string(r[1:41])
	}
	d, ok := combineDigests(digests)
	if !ok {
		return replies[0]
	}
	return []byte("+" + d + "\r\n")
}
