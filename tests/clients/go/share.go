package main

// Share-group consumers (KIP-932) on franz-go's kgo (kgo.ShareGroup), the Go twin of
// tests/clients/java/ShareConsumers.java and of tests/kits/share_clients.py, speaking the same
// protocol (see ShareConsumers.java):
//
//	members share CONFIG_JSON    config: {"bootstrap", "group", "topic", "members": [names],
//	                             "behaviour": "accept" | "poison:<list>" | "hold", "idle_ms"?,
//	                             "total"?, "max_poll_records"?}
//
// One JSON line per delivered record ({"member", "client": "franz-go", "partition", "offset",
// "delivery_count", "ack", "ts", "acked_ts", "ack_error"?}) once its acknowledgement is flushed
// (Record.Ack, then Client.FlushAcks; the per-partition outcome comes from kgo.ShareAckCallback),
// {"member", "held": n} in hold mode, and a summary line per member at the end. "stop" on stdin
// stops every member.
//
// franz-go has no explicit acknowledgement mode: a record not acked before the next PollRecords
// is accepted by that poll. Every record is acked (Accept, Release or Reject) before the next
// poll here, and hold mode never polls again.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

type shareConfig struct {
	Bootstrap      string   `json:"bootstrap"`
	Group          string   `json:"group"`
	Topic          string   `json:"topic"`
	Members        []string `json:"members"`
	Behaviour      string   `json:"behaviour"`
	IdleMs         int64    `json:"idle_ms"`
	Total          int64    `json:"total"`
	MaxPollRecords int      `json:"max_poll_records"`
}

type shareBehaviour struct {
	mode      string // accept, poison, hold
	rejectAny map[int64]bool
	rejectAt  map[[2]int64]bool
}

func parseShareBehaviour(text string) (*shareBehaviour, error) {
	b := &shareBehaviour{mode: text, rejectAny: map[int64]bool{}, rejectAt: map[[2]int64]bool{}}
	switch {
	case text == "" || text == "accept":
		b.mode = "accept"
	case text == "hold":
	case strings.HasPrefix(text, "poison:"):
		b.mode = "poison"
		for _, entry := range strings.Split(strings.TrimPrefix(text, "poison:"), ",") {
			entry = strings.TrimSpace(entry)
			if entry == "" {
				continue
			}
			if p, o, ok := strings.Cut(entry, ":"); ok {
				pi, err1 := strconv.ParseInt(p, 10, 32)
				oi, err2 := strconv.ParseInt(o, 10, 64)
				if err1 != nil || err2 != nil {
					return nil, fmt.Errorf("poison entry %q", entry)
				}
				b.rejectAt[[2]int64{pi, oi}] = true
			} else {
				oi, err := strconv.ParseInt(entry, 10, 64)
				if err != nil {
					return nil, fmt.Errorf("poison entry %q", entry)
				}
				b.rejectAny[oi] = true
			}
		}
	default:
		return nil, fmt.Errorf("behaviour %q", text)
	}
	return b, nil
}

func (b *shareBehaviour) decide(r *kgo.Record) kgo.AckStatus {
	if b.mode != "poison" {
		return kgo.AckAccept
	}
	if strings.HasPrefix(string(r.Value), "poison") {
		return kgo.AckRelease
	}
	if b.rejectAny[r.Offset] || b.rejectAt[[2]int64{int64(r.Partition), r.Offset}] {
		return kgo.AckReject
	}
	return kgo.AckAccept
}

func runShare(raw string) {
	var cfg shareConfig
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		fatal(err)
	}
	behaviour, err := parseShareBehaviour(cfg.Behaviour)
	if err != nil {
		fatal(err)
	}
	if cfg.IdleMs == 0 {
		cfg.IdleMs = 20000
	}
	var stopping atomic.Bool
	go func() {
		in := bufio.NewScanner(os.Stdin)
		for in.Scan() {
			if strings.TrimSpace(in.Text()) == "stop" {
				stopping.Store(true)
			}
		}
	}()
	var wg sync.WaitGroup
	for _, name := range cfg.Members {
		wg.Add(1)
		go func(name string) {
			defer wg.Done()
			shareMember(&cfg, name, behaviour, &stopping)
		}(name)
	}
	wg.Wait()
}

func shareMember(cfg *shareConfig, name string, b *shareBehaviour, stopping *atomic.Bool) {
	counts := map[string]int64{"delivered": 0, "accept": 0, "release": 0, "reject": 0, "hold": 0, "ack_errors": 0}
	summary := func(err error) {
		out := map[string]any{"member": name, "client": "franz-go", "summary": true}
		for k, v := range counts {
			out[k] = v
		}
		if err != nil {
			out["error"] = err.Error()
		}
		printJSON(out)
	}
	// The outcome of each flushed acknowledgement, by partition (callbacks run serially and
	// FlushAcks returns once they have run).
	var ackMu sync.Mutex
	ackErrors := map[int32]string{}
	opts := []kgo.Opt{
		kgo.SeedBrokers(strings.Split(cfg.Bootstrap, ",")...),
		kgo.ClientID(name),
		kgo.MetadataMinAge(250 * time.Millisecond),
		kgo.MetadataMaxAge(2 * time.Second),
		kgo.WithLogger(kgo.BasicLogger(os.Stderr, kgo.LogLevelWarn, nil)),
		kgo.ShareGroup(cfg.Group),
		kgo.ConsumeTopics(cfg.Topic),
		kgo.ShareAckCallback(func(_ *kgo.Client, results kgo.ShareAckResults) {
			ackMu.Lock()
			defer ackMu.Unlock()
			for _, r := range results {
				if r.Err != nil {
					ackErrors[r.Partition] = r.Err.Error()
				}
			}
		}),
	}
	if cfg.MaxPollRecords > 0 {
		opts = append(opts, kgo.ShareMaxRecords(int32(cfg.MaxPollRecords)))
	}
	client, err := kgo.NewClient(opts...)
	if err != nil {
		summary(err)
		return
	}
	maxPoll := cfg.MaxPollRecords
	if maxPoll <= 0 {
		maxPoll = 500
	}
	last := time.Now()
	var failure error
	for !stopping.Load() {
		poll, done := context.WithTimeout(context.Background(), 250*time.Millisecond)
		fetches := client.PollRecords(poll, maxPoll)
		done()
		ts := time.Now().UnixMilli()
		fetches.EachError(func(topic string, partition int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
				printJSON(map[string]any{"member": name, "client": "franz-go", "fetch_error": fmt.Sprintf("%s[%d]: %v", topic, partition, err)})
			}
		})
		records := fetches.Records()
		if len(records) == 0 {
			if time.Since(last) > time.Duration(cfg.IdleMs)*time.Millisecond {
				break
			}
			continue
		}
		last = time.Now()
		line := func(r *kgo.Record, ack string) map[string]any {
			return map[string]any{
				"member": name, "client": "franz-go", "partition": r.Partition, "offset": r.Offset,
				"delivery_count": r.DeliveryCount(), "ack": ack, "ts": ts,
			}
		}
		if b.mode == "hold" {
			for _, r := range records {
				counts["delivered"]++
				counts["hold"]++
				printJSON(line(r, "hold"))
			}
			printJSON(map[string]any{"member": name, "held": counts["hold"]})
			for !stopping.Load() {
				time.Sleep(100 * time.Millisecond)
			}
			// Exit without closing: a close would release (or accept) what is held.
			summary(nil)
			os.Exit(0)
		}
		lines := make([]map[string]any, 0, len(records))
		for _, r := range records {
			status := b.decide(r)
			r.Ack(status)
			counts["delivered"]++
			counts[status.String()]++
			lines = append(lines, line(r, status.String()))
		}
		ackMu.Lock()
		clear(ackErrors)
		ackMu.Unlock()
		flush, done := context.WithTimeout(context.Background(), 30*time.Second)
		err := client.FlushAcks(flush)
		done()
		if err != nil {
			failure = fmt.Errorf("FlushAcks: %w", err)
			break
		}
		ackedTs := time.Now().UnixMilli()
		ackMu.Lock()
		for _, l := range lines {
			l["acked_ts"] = ackedTs
			if e, ok := ackErrors[l["partition"].(int32)]; ok {
				l["ack_error"] = e
				counts["ack_errors"]++
			}
			printJSON(l)
		}
		ackMu.Unlock()
		if cfg.Total > 0 && counts["delivered"] >= cfg.Total {
			break
		}
	}
	client.Close()
	summary(failure)
}

// shareDescribe: `members share-describe {"bootstrap", "group"}` prints the group as
// ShareGroupDescribe tells it (kadm.DescribeShareGroups): {"group", "state", "epoch",
// "assignment_epoch", "assignor", "members": [{"member_id", "client_id", "epoch",
// "assignment": [[topic, partition], ...]}]}, or {"error": text}.
func shareDescribe(raw string) {
	var cfg shareConfig
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		fatal(err)
	}
	client, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(cfg.Bootstrap, ",")...))
	if err != nil {
		fatal(err)
	}
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	described, err := kadm.NewClient(client).DescribeShareGroups(ctx, cfg.Group)
	if err == nil {
		err = described.Error()
	}
	if err != nil {
		printJSON(map[string]any{"error": err.Error()})
		os.Exit(1)
	}
	g := described[cfg.Group]
	members := []map[string]any{}
	for _, m := range g.Members {
		assignment := [][2]any{}
		for _, tp := range m.Assignment.Sorted() {
			for _, p := range tp.Partitions {
				assignment = append(assignment, [2]any{tp.Topic, p})
			}
		}
		members = append(members, map[string]any{
			"member_id": m.MemberID, "client_id": m.ClientID, "epoch": m.MemberEpoch,
			"assignment": assignment,
		})
	}
	printJSON(map[string]any{
		"group": g.GroupID, "state": g.GroupState, "epoch": g.GroupEpoch,
		"assignment_epoch": g.AssignmentEpoch, "assignor": g.Assignor, "members": members,
	})
}
