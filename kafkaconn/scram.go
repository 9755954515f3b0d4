package kafkaconn

import (
	"crypto/sha256"
	"crypto/sha512"

	"github.com/IBM/sarama"
	"github.com/xdg-go/scram"
)

// scramClient is sarama's SCRAMClient (SASL SCRAM-SHA-256/512) on github.com/xdg-go/scram:
// sarama drives the exchange, this type computes each step.
type scramClient struct {
	hash scram.HashGeneratorFcn
	conv *scram.ClientConversation
}

// newSCRAMClient returns the generator sarama calls once per connection for mechanism.
func newSCRAMClient(mechanism string) func() sarama.SCRAMClient {
	hash := scram.HashGeneratorFcn(sha256.New)
	if mechanism == SASLScramSHA512 {
		hash = sha512.New
	}
	return func() sarama.SCRAMClient { return &scramClient{hash: hash} }
}

func (c *scramClient) Begin(user, password, authzID string) error {
	client, err := c.hash.NewClient(user, password, authzID)
	if err != nil {
		return err
	}
	c.conv = client.NewConversation()
	return nil
}

func (c *scramClient) Step(challenge string) (string, error) { return c.conv.Step(challenge) }

func (c *scramClient) Done() bool { return c.conv.Done() }
