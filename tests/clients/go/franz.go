package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// franzCommon: the connection options every franz-go client here uses.
func franzCommon(cfg *config, clientID string) []kgo.Opt {
	opts := []kgo.Opt{
		kgo.SeedBrokers(strings.Split(cfg.Bootstrap, ",")...),
		kgo.ClientID(clientID),
		kgo.MetadataMinAge(250 * time.Millisecond),
		kgo.MetadataMaxAge(2 * time.Second),
		kgo.WithLogger(kgo.BasicLogger(os.Stderr, kgo.LogLevelWarn, nil)),
	}
	if t := cfg.tlsClientConfig(); t != nil {
		opts = append(opts, kgo.DialTLSConfig(t))
	}
	if s := cfg.SASL; s != nil {
		var mechanism sasl.Mechanism
		switch s.Mechanism {
		case "PLAIN":
			mechanism = plain.Auth{User: s.User, Pass: s.Password}.AsMechanism()
		case "SCRAM-SHA-256":
			mechanism = scram.Auth{User: s.User, Pass: s.Password}.AsSha256Mechanism()
		case "SCRAM-SHA-512":
			mechanism = scram.Auth{User: s.User, Pass: s.Password}.AsSha512Mechanism()
		default:
			fatal(fmt.Errorf("sasl mechanism %q", s.Mechanism))
		}
		opts = append(opts, kgo.SASL(mechanism))
	}
	return opts
}

func franzBalancer(strategy string) kgo.GroupBalancer {
	switch strategy {
	case "", "range":
		return kgo.RangeBalancer()
	case "roundrobin":
		return kgo.RoundRobinBalancer()
	case "sticky":
		return kgo.StickyBalancer()
	case "cooperative-sticky":
		return kgo.CooperativeStickyBalancer()
	}
	fatal(fmt.Errorf("strategy %q", strategy))
	return nil
}

func runFranz(cfg *config, spec memberSpec, stop <-chan struct{}) {
	name := spec.Name
	clientID := spec.ClientID
	if clientID == "" {
		clientID = name
	}
	own := newOwnership(name)
	var client *kgo.Client
	commit := func(ctx context.Context) {
		if err := client.CommitUncommittedOffsets(ctx); err != nil {
			emit(name, map[string]any{"ev": "error", "error": "commit: " + err.Error()})
		}
	}
	opts := append(franzCommon(cfg, clientID),
		kgo.ConsumerGroup(cfg.Group),
		kgo.ConsumeTopics(cfg.Topics...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(200*time.Millisecond),
		kgo.DisableAutoCommit(),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, parts map[string][]int32) {
			own.change("assigned", parts, true)
		}),
		// Revoked: what was consumed is committed before the partitions go (as the docs advise).
		kgo.OnPartitionsRevoked(func(ctx context.Context, _ *kgo.Client, parts map[string][]int32) {
			if cfg.commits() && len(parts) > 0 {
				commit(ctx)
			}
			own.change("revoked", parts, false)
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, parts map[string][]int32) {
			own.change("lost", parts, false)
		}),
	)
	if cfg.Protocol == "consumer" {
		// KIP-848: franz-go names the server assignor by its balancer (sticky: uniform).
		balancer := kgo.StickyBalancer()
		if cfg.Assignor == "range" {
			balancer = kgo.RangeBalancer()
		}
		opts = append(opts, kgo.ServerSideBalancer(), kgo.Balancers(balancer))
	} else {
		opts = append(opts, kgo.Balancers(franzBalancer(cfg.Strategy)))
		if cfg.SessionTimeoutMs > 0 {
			opts = append(opts, kgo.SessionTimeout(time.Duration(cfg.SessionTimeoutMs)*time.Millisecond))
		}
		if cfg.HeartbeatIntervalMs > 0 {
			opts = append(opts, kgo.HeartbeatInterval(time.Duration(cfg.HeartbeatIntervalMs)*time.Millisecond))
		}
	}
	if spec.InstanceID != "" {
		opts = append(opts, kgo.InstanceID(spec.InstanceID))
	}
	client, err := kgo.NewClient(opts...)
	if err != nil {
		fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-stop
		cancel()
	}()
	for ctx.Err() == nil {
		poll, done := context.WithTimeout(ctx, 200*time.Millisecond)
		fetches := client.PollRecords(poll, 500)
		done()
		records := [][3]any{}
		fetches.EachError(func(topic string, partition int32, err error) {
			if ctx.Err() == nil && err != context.DeadlineExceeded && err != context.Canceled {
				emit(name, map[string]any{"ev": "error", "error": fmt.Sprintf("%s[%d]: %v", topic, partition, err)})
			}
		})
		fetches.EachRecord(func(r *kgo.Record) {
			records = append(records, [3]any{r.Topic, r.Partition, r.Offset})
		})
		if len(records) > 0 {
			if cfg.commits() {
				commit(context.Background())
			}
			emit(name, map[string]any{"ev": "records", "records": records})
		}
	}
	// Close leaves the group (a static member's leave keeps its place: KIP-345), revoking first.
	client.Close()
}

func franzProduce(cfg *config) error {
	opts := append(franzCommon(cfg, "franz-producer"), kgo.DefaultProduceTopic(cfg.Topic))
	client, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// The producer retries a refused connection until its context ends; a ping says at once.
	if err := client.Ping(ctx); err != nil {
		return err
	}
	records := make([]*kgo.Record, cfg.Count)
	for i := range records {
		records[i] = &kgo.Record{Key: []byte(fmt.Sprintf("k%d", i)), Value: []byte(fmt.Sprintf("franz %d", i))}
	}
	// Idempotent by default: the producer asks for an id (InitProducerId) first.
	return client.ProduceSync(ctx, records...).FirstErr()
}

// franzCommit: a group consumer (classic, or KIP-848 with "protocol": "consumer") reads
// cfg.Count records of cfg.Topics, then commits them with one CommitOffsetsSync, whose retries
// of retriable errors (kerr's COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR...) are the client's
// own. The report: how many it read, the error the commit ended with ("" if none), and the
// offsets the OffsetCommit response acknowledged, by partition.
func franzCommit(cfg *config) (map[string]any, error) {
	opts := append(franzCommon(cfg, "franz-committer"),
		kgo.ConsumerGroup(cfg.Group),
		kgo.ConsumeTopics(cfg.Topics...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(200*time.Millisecond),
		kgo.DisableAutoCommit(),
	)
	if cfg.Protocol == "consumer" {
		opts = append(opts, kgo.ServerSideBalancer(), kgo.Balancers(kgo.StickyBalancer()))
	}
	client, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	consumed := 0
	for consumed < cfg.Count && ctx.Err() == nil {
		fetches := client.PollRecords(ctx, 500)
		if err := fetches.Err0(); err != nil && ctx.Err() == nil {
			return nil, err
		}
		consumed += fetches.NumRecords()
	}
	commitErr := ""
	acked := map[string]int64{}
	start := time.Now()
	client.CommitOffsetsSync(ctx, client.UncommittedOffsets(),
		func(_ *kgo.Client, req *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
			if err != nil {
				commitErr = err.Error()
				return
			}
			for i, topic := range resp.Topics {
				for j, p := range topic.Partitions {
					if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
						commitErr = err.Error()
						continue
					}
					sent := req.Topics[i].Partitions[j]
					acked[fmt.Sprint(sent.Partition)] = sent.Offset
				}
			}
		})
	return map[string]any{
		"consumed":     consumed,
		"commit_error": commitErr,
		"commit_ms":    time.Since(start).Milliseconds(),
		"committed":    acked,
	}, nil
}
