package api

import "time"

// tuning holds the batching windows; tests shorten or shrink them.
type tuning struct {
	beatWindow   time.Duration // heartbeats per RecordBatch
	statusWindow time.Duration // agents' reports per transaction
	shareWindow  time.Duration // WatchShares coalescing
	assignWindow time.Duration // WatchAssignments coalescing
	netWindow    time.Duration // WatchNetwork coalescing
	watchBuffer  int           // change batches a watcher may lag behind
	maxBatch     int           // changes per watch message
}

func defaultTuning() tuning {
	return tuning{
		beatWindow:   100 * time.Millisecond,
		statusWindow: 5 * time.Millisecond,
		shareWindow:  10 * time.Millisecond,
		assignWindow: 5 * time.Millisecond,
		netWindow:    10 * time.Millisecond,
		watchBuffer:  1024,
		maxBatch:     500,
	}
}
