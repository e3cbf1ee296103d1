package main

import (
	"context"
	"crypto/sha256"
	"crypto/sha512"
	"errors"
	"fmt"
	"log"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/IBM/sarama"
	"github.com/xdg-go/scram"
)

// scramClient: sarama leaves SCRAM's client side to the application; this is the one its
// examples use (xdg-go/scram).
type scramClient struct {
	hash         scram.HashGeneratorFcn
	conversation *scram.ClientConversation
}

func (c *scramClient) Begin(user, password, authzID string) error {
	client, err := c.hash.NewClient(user, password, authzID)
	if err != nil {
		return err
	}
	c.conversation = client.NewConversation()
	return nil
}

func (c *scramClient) Step(challenge string) (string, error) { return c.conversation.Step(challenge) }
func (c *scramClient) Done() bool                            { return c.conversation.Done() }

func saramaConfig(cfg *config, clientID string) *sarama.Config {
	sarama.Logger = log.New(os.Stderr, "[sarama] ", log.LstdFlags)
	c := sarama.NewConfig()
	c.ClientID = clientID
	c.Version = sarama.V4_0_0_0
	c.Metadata.RefreshFrequency = 2 * time.Second
	if t := cfg.tlsClientConfig(); t != nil {
		c.Net.TLS.Enable = true
		c.Net.TLS.Config = t
	}
	if s := cfg.SASL; s != nil {
		c.Net.SASL.Enable = true
		c.Net.SASL.User = s.User
		c.Net.SASL.Password = s.Password
		c.Net.SASL.Mechanism = sarama.SASLMechanism(s.Mechanism)
		switch s.Mechanism {
		case "SCRAM-SHA-256":
			c.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &scramClient{hash: sha256.New} }
		case "SCRAM-SHA-512":
			c.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &scramClient{hash: sha512.New} }
		}
		if s.HandshakeV0 {
			// The pre-KIP-152 flow: SaslHandshake v0, then bare SASL tokens (no Kafka headers).
			c.Net.SASL.Version = sarama.SASLHandshakeV0
			c.ApiVersionsRequest = false
		}
	}
	return c
}

func saramaStrategy(strategy string) sarama.BalanceStrategy {
	switch strategy {
	case "", "range":
		return sarama.NewBalanceStrategyRange()
	case "roundrobin":
		return sarama.NewBalanceStrategyRoundRobin()
	case "sticky":
		return sarama.NewBalanceStrategySticky()
	case "cooperative-sticky":
		return sarama.NewBalanceStrategyCooperativeSticky()
	}
	fatal(fmt.Errorf("strategy %q", strategy))
	return nil
}

// saramaHandler reports a partition owned while its ConsumeClaim runs: sarama starts claims after
// the group's SyncGroup and ends them (and waits for them) before it rejoins or leaves.
type saramaHandler struct {
	name   string
	own    *ownership
	commit bool
}

func (h *saramaHandler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (h *saramaHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (h *saramaHandler) ConsumeClaim(session sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	tp := map[string][]int32{claim.Topic(): {claim.Partition()}}
	h.own.change("assigned", tp, true)
	defer func() {
		if h.commit {
			session.Commit()
		}
		h.own.change("revoked", tp, false)
	}()
	messages := claim.Messages()
	for {
		select {
		case <-session.Context().Done():
			return nil
		case msg, ok := <-messages:
			if !ok {
				return nil
			}
			records := [][3]any{{msg.Topic, msg.Partition, msg.Offset}}
			session.MarkMessage(msg, "")
			// Everything already buffered goes in the same batch and the same commit.
			for len(messages) > 0 {
				msg, ok = <-messages
				if !ok {
					break
				}
				records = append(records, [3]any{msg.Topic, msg.Partition, msg.Offset})
				session.MarkMessage(msg, "")
			}
			if h.commit {
				session.Commit()
			}
			emit(h.name, map[string]any{"ev": "records", "records": records})
		}
	}
}

func runSarama(cfg *config, spec memberSpec, stop <-chan struct{}) {
	name := spec.Name
	clientID := spec.ClientID
	if clientID == "" {
		clientID = name
	}
	c := saramaConfig(cfg, clientID)
	c.Consumer.Return.Errors = true
	c.Consumer.Offsets.Initial = sarama.OffsetOldest
	c.Consumer.Offsets.AutoCommit.Enable = false
	c.Consumer.MaxWaitTime = 200 * time.Millisecond
	// sarama retries a failed join 4 times, 2 s apart by default: a refused group took 14 s to report.
	c.Consumer.Group.Rebalance.Retry.Backoff = 250 * time.Millisecond
	c.Consumer.Group.Rebalance.GroupStrategies = []sarama.BalanceStrategy{saramaStrategy(cfg.Strategy)}
	if cfg.SessionTimeoutMs > 0 {
		c.Consumer.Group.Session.Timeout = time.Duration(cfg.SessionTimeoutMs) * time.Millisecond
	}
	if cfg.HeartbeatIntervalMs > 0 {
		c.Consumer.Group.Heartbeat.Interval = time.Duration(cfg.HeartbeatIntervalMs) * time.Millisecond
	}
	if spec.InstanceID != "" {
		c.Consumer.Group.InstanceId = spec.InstanceID
	}
	group, err := sarama.NewConsumerGroup(strings.Split(cfg.Bootstrap, ","), cfg.Group, c)
	if err != nil {
		emit(name, map[string]any{"ev": "error", "error": err.Error()})
		<-stop
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		for err := range group.Errors() {
			emit(name, map[string]any{"ev": "error", "error": err.Error()})
		}
	}()
	go func() {
		defer wg.Done()
		handler := &saramaHandler{name: name, own: newOwnership(name), commit: cfg.commits()}
		// An eager rebalance ends Consume; it is called again for the next generation.
		for ctx.Err() == nil {
			if err := group.Consume(ctx, cfg.Topics, handler); err != nil && !errors.Is(err, sarama.ErrClosedConsumerGroup) {
				emit(name, map[string]any{"ev": "error", "error": "consume: " + err.Error()})
				time.Sleep(100 * time.Millisecond)
			}
		}
	}()
	<-stop
	cancel()
	// Close leaves the group (not for a static member) after the claims have ended.
	if err := group.Close(); err != nil {
		emit(name, map[string]any{"ev": "error", "error": "close: " + err.Error()})
	}
	wg.Wait()
}

func saramaProduce(cfg *config) error {
	c := saramaConfig(cfg, "sarama-producer")
	c.Producer.Return.Successes = true
	c.Producer.RequiredAcks = sarama.WaitForAll
	producer, err := sarama.NewSyncProducer(strings.Split(cfg.Bootstrap, ","), c)
	if err != nil {
		return err
	}
	defer producer.Close()
	messages := make([]*sarama.ProducerMessage, cfg.Count)
	for i := range messages {
		messages[i] = &sarama.ProducerMessage{Topic: cfg.Topic, Key: sarama.StringEncoder(fmt.Sprintf("k%d", i)),
			Value: sarama.StringEncoder(fmt.Sprintf("sarama %d", i))}
	}
	return producer.SendMessages(messages)
}
