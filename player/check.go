package player

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/IBM/sarama"
)

// Check is what `player -check` runs on a Player made by New (which has loaded the TLS
// files, the tokens and the admin endpoint's files, or failed): it prints how gRPC is
// secured, reaches Kafka, lists its topics and checks that each stream's topic exists
// with one partition. It writes one line per finding on w and returns an error naming
// every problem; it does not serve.
func (p *Player) Check(w io.Writer) error {
	c := &p.cfg
	var problems []string
	ok := func(format string, a ...any) { fmt.Fprintf(w, "ok    "+format+"\n", a...) }
	fail := func(format string, a ...any) {
		msg := fmt.Sprintf(format, a...)
		problems = append(problems, msg)
		fmt.Fprintf(w, "FAIL  %s\n", msg)
	}
	ok("config: %d stream(s), listen %s, http %s, admin %s", len(c.Streams), or(c.Listen, "off"), or(c.HTTPAddr, "off"), or(c.Admin.Addr, "off"))
	switch {
	case p.tls != nil:
		cert := p.tls.Certificate()
		leaf := cert.Leaf
		if leaf != nil {
			ok("tls: %s, certificate for %s valid until %s (%s left)", c.TLS.CertFile, strings.Join(leaf.DNSNames, ","),
				leaf.NotAfter.UTC().Format(time.RFC3339), time.Until(leaf.NotAfter).Round(time.Hour))
			if time.Now().After(leaf.NotAfter) {
				fail("tls: the certificate in %s expired on %s", c.TLS.CertFile, leaf.NotAfter.UTC().Format(time.RFC3339))
			}
		} else {
			ok("tls: %s", c.TLS.CertFile)
		}
		if p.auth.mtls {
			ok("tls: client certificates verified with %s", c.TLS.ClientCAFile)
		}
	case c.Insecure:
		ok("tls: off (insecure: true): gRPC is plaintext")
	}
	if p.auth.tokens != nil {
		ok("tokens: %d client token(s) from %s", p.auth.tokens.Len(), tokenSources(c.Tokens.File, c.Tokens.Env))
	} else if p.auth.open {
		ok("tokens: none and no client CA: every client is anonymous")
	}
	if p.admin != nil {
		ok("admin: %s, tokens %v", c.Admin.Addr, c.Admin.Tokens.Enabled())
	}

	conn := c.kafka()
	kc := conn.SaramaConfig()
	client, err := sarama.NewClient(c.Kafka.Brokers, kc)
	if err != nil {
		fail("kafka: %s: %v", strings.Join(c.Kafka.Brokers, ","), err)
		return checkErr(problems)
	}
	defer client.Close()
	topics, err := client.Topics()
	if err != nil {
		fail("kafka: list topics: %v", err)
		return checkErr(problems)
	}
	ok("kafka: %s answers: %d broker(s), %d topic(s)", strings.Join(c.Kafka.Brokers, ","), len(client.Brokers()), len(topics))
	for _, s := range c.Streams {
		if !slices.Contains(topics, s.Topic) {
			fail("stream %s: topic %s does not exist", s.Name, s.Topic)
			continue
		}
		parts, err := client.Partitions(s.Topic)
		switch {
		case err != nil:
			fail("stream %s: topic %s: %v", s.Name, s.Topic, err)
		case len(parts) != 1:
			fail("stream %s: topic %s has %d partitions, a stream needs 1", s.Name, s.Topic, len(parts))
		default:
			end, err := client.GetOffset(s.Topic, 0, sarama.OffsetNewest)
			if err != nil {
				fail("stream %s: topic %s: end offset: %v", s.Name, s.Topic, err)
				continue
			}
			ok("stream %s: topic %s, 1 partition, end offset %d", s.Name, s.Topic, end)
		}
	}
	return checkErr(problems)
}

func checkErr(problems []string) error {
	if len(problems) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s", ErrCheck, strings.Join(problems, "; "))
}

func tokenSources(file, env string) string {
	var s []string
	if file != "" {
		s = append(s, file)
	}
	if env != "" {
		s = append(s, "$"+env)
	}
	return strings.Join(s, " and ")
}

func or(s, dflt string) string {
	if s == "" {
		return dflt
	}
	return s
}
