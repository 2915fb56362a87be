package etcdops

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// stream writes messages as etcd's gateway does for a server-streaming call.
func stream(blobs ...[]byte) string {
	var b strings.Builder
	for i, blob := range blobs {
		fmt.Fprintf(&b, `{"result":{"header":{"cluster_id":"1"},"remaining_bytes":"%d","blob":"%s"}}`+"\n",
			len(blobs)-1-i, base64.StdEncoding.EncodeToString(blob))
	}
	return b.String()
}

func TestCopySnapshot(t *testing.T) {
	db := bytes.Repeat([]byte("bolt"), 20000)
	sum := sha256.Sum256(db)
	whole := stream(db[:32768], db[32768:65536], db[65536:], sum[:])

	var out bytes.Buffer
	if err := copySnapshot(strings.NewReader(whole), &out); err != nil {
		t.Fatal(err)
	}
	if want := append(append([]byte{}, db...), sum[:]...); !bytes.Equal(out.Bytes(), want) {
		t.Errorf("wrote %d bytes, want the database and its checksum (%d bytes)", out.Len(), len(want))
	}

	// Cut after a whole message: it looks like a clean end but has no trailer.
	cut := stream(db[:32768], db[32768:65536])
	if err := copySnapshot(strings.NewReader(cut), &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), "incomplete") {
		t.Errorf("a stream cut short = %v, want it reported incomplete", err)
	}

	failed := stream(db[:32768]) + `{"error":{"code":14,"message":"etcdserver: leader changed"}}` + "\n"
	var se *StatusError
	if err := copySnapshot(strings.NewReader(failed), &bytes.Buffer{}); !errors.As(err, &se) || se.Code != 14 {
		t.Errorf("a stream that ends in an error = %v, want etcd's error", err)
	}
}

func TestMemberJSON(t *testing.T) {
	// As the gateway writes it: protobuf names, 64-bit IDs as strings, false left out.
	var r memberListResponse
	in := `{"header":{"member_id":"9"},"members":[{"ID":"18446744073709551615","name":"cp1","peerURLs":["https://10.0.0.1:2380"],"clientURLs":["https://10.0.0.1:2379"]},{"ID":"7","peerURLs":["https://10.0.0.2:2380"],"isLearner":true}]}`
	if err := jsonUnmarshal(in, &r); err != nil {
		t.Fatal(err)
	}
	if len(r.Members) != 2 || r.Members[0].ID != 1<<64-1 || r.Members[0].Name != "cp1" || r.Members[0].IsLearner ||
		r.Members[1].ID != 7 || !r.Members[1].IsLearner || r.Members[1].PeerURLs[0] != "https://10.0.0.2:2380" {
		t.Errorf("decoded %+v", r.Members)
	}
}

func jsonUnmarshal(s string, v any) error { return json.Unmarshal([]byte(s), v) }
