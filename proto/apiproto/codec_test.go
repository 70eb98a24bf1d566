package apiproto

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/stratahq/strata/internal/api"
)

// TestIsJSON pins the rule that tells the two encodings apart: '{' is the
// key of field 15 with wire type 3 (a group), which proto3 never writes.
func TestIsJSON(t *testing.T) {
	num, typ, n := protowire.ConsumeTag([]byte("{"))
	if n != 1 || num != 15 || typ != protowire.StartGroupType {
		t.Fatalf("'{' as a protobuf key: field %d, wire type %d (%d bytes); want field 15, a group start", num, typ, n)
	}
	for _, c := range []struct {
		in   string
		want bool
	}{{`{"id":"a"}`, true}, {`{}`, true}, {"", false}, {"\x0a\x01a", false}} {
		if got := IsJSON([]byte(c.in)); got != c.want {
			t.Errorf("IsJSON(%q) = %v; want %v", c.in, got, c.want)
		}
	}
}

// TestStoreCodecDecodesBoth reads one assignment written both ways, and
// refuses bytes that are neither.
func TestStoreCodecDecodesBoth(t *testing.T) {
	c := StoreCodec(FormatBinary, AssignmentToPB, AssignmentFromPB)
	in := api.Assignment{ID: "web-1", Node: "n1", Labels: map[string]string{"b": "2", "a": "1"}, CreatedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	bin, err := c.Marshal(&in)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := c.Marshal(&in)
	if string(bin) != string(again) {
		t.Error("two encodings of one value differ")
	}
	for name, b := range map[string][]byte{
		"binary": bin,
		"JSON":   []byte(`{"id":"web-1","node":"n1","labels":{"a":"1","b":"2"},"createdAt":"2026-01-02T03:04:05Z"}`),
	} {
		var got api.Assignment
		if err := c.Unmarshal(b, &got); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got.ID != in.ID || got.Node != in.Node || got.Labels["a"] != "1" || !got.CreatedAt.Equal(in.CreatedAt) {
			t.Errorf("%s: got %+v; want %+v", name, got, in)
		}
	}
	var got api.Assignment
	if err := c.Unmarshal([]byte("\xff\xff\xff"), &got); err == nil {
		t.Error("garbage decoded without an error")
	}
	if err := c.Unmarshal([]byte(`{"id":`), &got); err == nil || !strings.Contains(err.Error(), "JSON") {
		t.Errorf("truncated JSON: err = %v; want a JSON error", err)
	}
}
