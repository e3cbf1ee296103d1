// Consumer-group members and producers on the Go clients franz-go (kgo) and sarama, for the
// client tests (tests/clients/go/test_go_node_clients.py through tests/kits/cgkit.py). The members speak the
// protocol of tests/kits/cg_member.py (see there): one JSON config argument, JSON lines on stdout
// ("owned", "records", "error", "closed", each with "m" and "t", CLOCK_MONOTONIC in ns),
// "close NAME" or EOF on stdin.
//
//	members CONFIG_JSON            config: {"client": "franz-go"|"sarama", "bootstrap", "group",
//	                               "members": [...], "topics", "protocol"?, "strategy"?,
//	                               "assignor"?, "session_timeout_ms"?, "heartbeat_interval_ms"?,
//	                               "commit"?, "tls"?: {"ca"}, "sasl"?: {"mechanism", "user",
//	                               "password", "handshake_v0"?}}
//	members produce CONFIG_JSON    config: {"client", "bootstrap", "topic", "count", "tls"?,
//	                               "sasl"?}: produces count records (keys "k<i>") and prints
//	                               {"produced": count} once every one is acknowledged, or
//	                               {"error": text}.
//	members commit CONFIG_JSON     config: {"client": "franz-go", "bootstrap", "group", "topics",
//	                               "count", "protocol"?}: a group consumer reads count records and
//	                               commits them with one CommitOffsetsSync; prints {"consumed",
//	                               "commit_error", "commit_ms", "committed": {partition: offset}}
//	                               (franz.go's franzCommit), or {"error": text}.
//	members txn CONFIG_JSON        config: {"client": "franz-go", "bootstrap", "topic", "count"}:
//	                               transactions of ten records, even ones committed and odd ones
//	                               aborted, then a read-committed consumer; prints {"committed",
//	                               "seen"} (franz_txn.go), or {"error": text}.
//	members admin CONFIG_JSON      config: {"client", "bootstrap", "topic", "group", "source",
//	                               "empty_group"}: the admin API calls of admin.go, printed as
//	                               one JSON object (adminReport), or {"error": text}.
//	members share CONFIG_JSON      franz-go share-group consumers (KIP-932) of share.go, the
//	                               protocol of tests/clients/java/ShareConsumers.java.
//	members share-describe CONFIG_JSON  config: {"bootstrap", "group"}: the share group as
//	                               ShareGroupDescribe tells it (share.go's shareDescribe).
package main

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

type tlsConfig struct {
	CA string `json:"ca"`
}

type saslConfig struct {
	Mechanism   string `json:"mechanism"` // PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512
	User        string `json:"user"`
	Password    string `json:"password"`
	HandshakeV0 bool   `json:"handshake_v0"` // sarama only: SaslHandshake v0 and raw tokens
}

type memberSpec struct {
	Name       string `json:"name"`
	ClientID   string `json:"client_id"`
	InstanceID string `json:"instance_id"`
}

type config struct {
	Client              string       `json:"client"`
	Bootstrap           string       `json:"bootstrap"`
	Group               string       `json:"group"`
	Members             []memberSpec `json:"members"`
	Topics              []string     `json:"topics"`
	Protocol            string       `json:"protocol"` // classic (default) or consumer (franz-go only)
	Strategy            string       `json:"strategy"` // range, roundrobin, sticky, cooperative-sticky
	Assignor            string       `json:"assignor"` // consumer protocol: uniform or range
	SessionTimeoutMs    int          `json:"session_timeout_ms"`
	HeartbeatIntervalMs int          `json:"heartbeat_interval_ms"`
	Commit              *bool        `json:"commit"`
	TLS                 *tlsConfig   `json:"tls"`
	SASL                *saslConfig  `json:"sasl"`
	Topic               string       `json:"topic"`       // produce, admin
	Count               int          `json:"count"`       // produce
	Source              string       `json:"source"`      // admin
	EmptyGroup          string       `json:"empty_group"` // admin
}

func (c *config) commits() bool { return c.Commit == nil || *c.Commit }

func (c *config) tlsClientConfig() *tls.Config {
	if c.TLS == nil {
		return nil
	}
	pem, err := os.ReadFile(c.TLS.CA)
	if err != nil {
		fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		fatal(fmt.Errorf("no certificate in %s", c.TLS.CA))
	}
	return &tls.Config{RootCAs: pool, ServerName: "localhost"}
}

var outLock sync.Mutex

func monotonicNs() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		fatal(err)
	}
	return ts.Nano()
}

func printJSON(v any) {
	line, err := json.Marshal(v)
	if err != nil {
		fatal(err)
	}
	outLock.Lock()
	defer outLock.Unlock()
	os.Stdout.Write(append(line, '\n'))
}

func emit(name string, event map[string]any) {
	event["m"] = name
	event["t"] = monotonicNs()
	printJSON(event)
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "members:", err)
	os.Exit(2)
}

// ownership is what one member owns, reported at every change.
type ownership struct {
	name  string
	mu    sync.Mutex
	owned map[[2]any]bool
}

func newOwnership(name string) *ownership {
	return &ownership{name: name, owned: map[[2]any]bool{}}
}

func (o *ownership) change(why string, parts map[string][]int32, add bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for topic, ps := range parts {
		for _, p := range ps {
			if add {
				o.owned[[2]any{topic, p}] = true
			} else {
				delete(o.owned, [2]any{topic, p})
			}
		}
	}
	owned := make([][2]any, 0, len(o.owned))
	for tp := range o.owned {
		owned = append(owned, tp)
	}
	sort.Slice(owned, func(i, j int) bool {
		a, b := owned[i], owned[j]
		if a[0].(string) != b[0].(string) {
			return a[0].(string) < b[0].(string)
		}
		return a[1].(int32) < b[1].(int32)
	})
	emit(o.name, map[string]any{"ev": "owned", "why": why, "owned": owned})
}

// member is one running member: stop asks it to leave, done is closed once it has.
type member struct {
	stop chan struct{}
	done chan struct{}
}

func main() {
	args := os.Args[1:]
	command := "members"
	if len(args) == 2 {
		command, args = args[0], args[1:]
	}
	if len(args) != 1 {
		fatal(fmt.Errorf("usage: members [produce|commit|admin|txn|share|share-describe] CONFIG_JSON"))
	}
	if command == "share" {
		runShare(args[0])
		return
	}
	if command == "share-describe" {
		shareDescribe(args[0])
		return
	}
	var cfg config
	if err := json.Unmarshal([]byte(args[0]), &cfg); err != nil {
		fatal(err)
	}
	if command == "admin" {
		var report *adminReport
		var err error
		switch cfg.Client {
		case "franz-go":
			report, err = franzAdmin(&cfg)
		case "sarama":
			report, err = saramaAdmin(&cfg)
		default:
			err = fmt.Errorf("client %q", cfg.Client)
		}
		if err != nil {
			printJSON(map[string]any{"error": err.Error()})
			os.Exit(1)
		}
		printJSON(report)
		return
	}
	if command == "txn" {
		report, err := franzTxn(&cfg)
		if err != nil {
			printJSON(map[string]any{"error": err.Error()})
			os.Exit(1)
		}
		printJSON(report)
		return
	}
	if command == "commit" {
		if cfg.Client != "franz-go" {
			fatal(fmt.Errorf("commit: client %q", cfg.Client))
		}
		report, err := franzCommit(&cfg)
		if err != nil {
			printJSON(map[string]any{"error": err.Error()})
			os.Exit(1)
		}
		printJSON(report)
		return
	}
	if command == "produce" {
		var err error
		switch cfg.Client {
		case "franz-go":
			err = franzProduce(&cfg)
		case "sarama":
			err = saramaProduce(&cfg)
		default:
			err = fmt.Errorf("client %q", cfg.Client)
		}
		if err != nil {
			printJSON(map[string]any{"error": err.Error()})
			os.Exit(1)
		}
		printJSON(map[string]any{"produced": cfg.Count})
		return
	}
	members := map[string]*member{}
	for _, spec := range cfg.Members {
		m := &member{stop: make(chan struct{}), done: make(chan struct{})}
		members[spec.Name] = m
		go func(spec memberSpec) {
			defer close(m.done)
			switch cfg.Client {
			case "franz-go":
				runFranz(&cfg, spec, m.stop)
			case "sarama":
				runSarama(&cfg, spec, m.stop)
			default:
				fatal(fmt.Errorf("client %q", cfg.Client))
			}
			emit(spec.Name, map[string]any{"ev": "closed"})
		}(spec)
	}
	stopped := map[string]bool{}
	stopOne := func(name string) {
		if m, ok := members[name]; ok && !stopped[name] {
			stopped[name] = true
			close(m.stop)
		}
	}
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		words := strings.Fields(in.Text())
		if len(words) == 2 && words[0] == "close" {
			stopOne(words[1])
		}
	}
	for name := range members {
		stopOne(name)
	}
	for _, m := range members {
		<-m.done
	}
}
