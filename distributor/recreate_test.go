package distributor

import (
	"testing"

	"github.com/IBM/sarama"

	"github.com/statecast/statecast/kafkaconn"
)

// TestTopicDeletedUnderActive: the topic of an active stream is deleted. The stream must
// not go on publishing from its in-memory state (its hashes describe rows the new topic
// does not hold): it creates the topic again, reads its (empty) state back and republishes
// every row in a full epoch, so that a reader of the new topic gets the whole view.
func TestTopicDeletedUnderActive(t *testing.T) {
	e := newEnv(t)
	e.createItems()
	r := start(t, e.config(itemsView()))
	r.waitReady(t)
	client, err := sarama.NewClient(e.brokers, kafkaconn.NewConfig("test"))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	first, err := kafkaconn.TopicID(client, e.topic)
	if err != nil {
		t.Fatal(err)
	}
	admin, err := sarama.NewClusterAdminFromClient(client)
	if err != nil {
		t.Fatal(err)
	}
	if err := admin.DeleteTopic(e.topic); err != nil {
		t.Fatal(err)
	}
	waitCond(t, "the topic created again", func() bool {
		id, err := kafkaconn.TopicID(client, e.topic)
		return err == nil && id != first
	})
	e.exec(`INSERT INTO items (id, name) VALUES (4, 'after the deletion')`)
	recs := waitFor(t, e, "every row in the new topic", func(recs []rec) bool {
		return len(rowsOf(recs, "items")) == 4 && countEnds(recs, "items") >= 1
	})
	end := lastEnd(t, recs, "items")
	if end.Published < 3 {
		t.Errorf("the epoch in the new topic published %d rows; want every row (%+v)", end.Published, end)
	}
	want := canonMap(t, e.dbRows("items", itemsSQL, "id"))
	got := rowsOf(recs, "items")
	for k := range want {
		if _, ok := got[k]; !ok {
			t.Errorf("row %s missing from the new topic:\n%s", k, dump(recs))
		}
	}
}
