package store

import (
	"encoding/base64"
	"testing"
)

func TestContinueToken(t *testing.T) {
	want := continueToken{Rev: 42, Key: "resources/tenant/a\x00b"}
	got, err := decodeContinue(encodeContinue(want))
	if err != nil || got != want {
		t.Errorf("round trip = %+v, %v; want %+v", got, err, want)
	}
	for _, bad := range []string{
		"",
		"!!!",
		base64.RawURLEncoding.EncodeToString([]byte("not json")),
		base64.RawURLEncoding.EncodeToString([]byte(`{"r":0,"k":"a"}`)),
		base64.RawURLEncoding.EncodeToString([]byte(`{"r":5,"k":""}`)),
	} {
		if tok, err := decodeContinue(bad); err == nil {
			t.Errorf("decodeContinue(%q) = %+v; want an error", bad, tok)
		}
	}
}

func TestModifyDelay(t *testing.T) {
	for attempt := 1; attempt <= 2*modifyAttempts; attempt++ {
		if d := modifyDelay(attempt); d < 0 || d >= modifyMaxDelay {
			t.Errorf("modifyDelay(%d) = %s; want within [0, %s)", attempt, d, modifyMaxDelay)
		}
	}
}
