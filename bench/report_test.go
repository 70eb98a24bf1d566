package main

import (
	"slices"
	"sort"
	"testing"
)

func TestIDOrder(t *testing.T) {
	ids := []string{"P1", "DNS3", "B10", "N1", "B2", "DNS1", "C1", "A2"}
	sort.SliceStable(ids, func(i, j int) bool { return idOrder(ids[i]) < idOrder(ids[j]) })
	want := []string{"A2", "B2", "B10", "C1", "DNS1", "DNS3", "N1", "P1"}
	if !slices.Equal(ids, want) {
		t.Errorf("got %v, want %v", ids, want)
	}
}
