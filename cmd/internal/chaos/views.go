package chaos

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// The run's database: accounts, categories, items and order lines, and seven views over
// them — a plain one, a filtered one (rows enter and leave it on updates), a join whose
// joined key is selected (changes of categories are mapped to item rows), a composite key,
// a join mapped through the join's equality (with a declared dependency the analysis no
// longer needs), the items of each category aggregated by the category's key (items moving
// between categories, groups emptied), and the items some order line names (EXISTS: rows
// entering and leaving with the lines).
//
// Every row has a version v, taken from one sequence by every insert and update, and every
// view selects the versions of the rows it joins: a view row's versions only grow along
// the stream, so a record whose versions are below those of an earlier record of its key
// is an old row landing after a newer one (tap.stale).
const schema = `
CREATE SEQUENCE chaos_v;
CREATE TABLE accounts (id int PRIMARY KEY, owner text NOT NULL, balance bigint NOT NULL, active boolean NOT NULL,
  v bigint NOT NULL DEFAULT nextval('chaos_v'));
CREATE TABLE categories (id int PRIMARY KEY, name text NOT NULL, discount int NOT NULL, v bigint NOT NULL DEFAULT nextval('chaos_v'));
CREATE TABLE items (id int PRIMARY KEY, category_id int NOT NULL, name text NOT NULL, price bigint NOT NULL, stock int NOT NULL,
  v bigint NOT NULL DEFAULT nextval('chaos_v'));
CREATE TABLE order_lines (order_id int, line int, item_id int NOT NULL, qty int NOT NULL, v bigint NOT NULL DEFAULT nextval('chaos_v'),
  PRIMARY KEY (order_id, line));
`

// versionColumns are the columns of the views that hold a row version. A view row's
// version is the largest of them: any change of the row takes a new version from the
// sequence, larger than every earlier one, into one of them (a join partner that changes
// for an older one comes with a new version of the row that points to it).
var versionColumns = []string{"v", "cv", "iv"}

// rowVersion is the version of a row's JSON object (0 when it has none).
func rowVersion(row []byte) int64 {
	var n int64
	for _, c := range versionColumns {
		n = max(n, intColumn(row, c))
	}
	return n
}

// viewDef is one view of the stream, as the distributor publishes it and as the checks
// read it back from PostgreSQL.
type viewDef struct {
	Name    string
	SQL     string
	Key     []string
	Depends map[string][]string // the distributor's depends
	// Index, when set, is a secondary index of the clients: its name and the column whose
	// value it indexes by.
	Index, IndexColumn string
	// SumColumn, when set, is an integer column that the clients sum per writer partition
	// (the atomicity probe).
	SumColumn string
}

var views = []viewDef{
	{Name: "accounts", SQL: "SELECT id, owner, balance, active, v FROM accounts", Key: []string{"id"},
		Index: "owner", IndexColumn: "owner", SumColumn: "balance"},
	{Name: "rich", SQL: "SELECT id, owner, balance, v FROM accounts WHERE balance >= 1500 AND active", Key: []string{"id"}},
	{Name: "items", SQL: "SELECT i.id, i.name, i.price, i.stock, i.v, c.id AS category_id, c.name AS category, c.discount, c.v AS cv FROM items i JOIN categories c ON c.id = i.category_id",
		Key: []string{"id"}, Index: "category", IndexColumn: "category_id"},
	{Name: "lines", SQL: "SELECT order_id, line, item_id, qty, v FROM order_lines", Key: []string{"order_id", "line"},
		Index: "order", IndexColumn: "order_id"},
	{Name: "priced_lines", SQL: "SELECT l.order_id, l.line, l.qty, l.item_id, l.v, i.name, i.price, i.v AS iv FROM order_lines l JOIN items i ON i.id = l.item_id",
		Key: []string{"order_id", "line"}, Depends: map[string][]string{"items": {"item_id"}}},
	// The group's version is its category's: an aggregate's max(i.v) falls when the newest
	// item leaves, which the stale check would take for an old row.
	{Name: "category_stock", SQL: "SELECT c.id, c.v AS cv, count(i.id) AS items, coalesce(sum(i.stock), 0) AS stock FROM categories c LEFT JOIN items i ON i.category_id = c.id GROUP BY c.id",
		Key: []string{"id"}},
	{Name: "ordered_items", SQL: "SELECT i.id, i.name, i.v FROM items i WHERE EXISTS (SELECT 1 FROM order_lines l WHERE l.item_id = i.id)",
		Key: []string{"id"}},
}

func viewByName(name string) *viewDef {
	for i := range views {
		if views[i].Name == name {
			return &views[i]
		}
	}
	return nil
}

// canonical turns a row's JSON object into a text that is equal for equal rows whatever
// the member order and number formatting: "col=value" pairs sorted by column, each value
// in Go's JSON encoding of the decoded value (numbers as their exact digits).
func canonical(row []byte) (string, error) {
	d := json.NewDecoder(bytes.NewReader(row))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		return "", err
	}
	cols := make([]string, 0, len(m))
	for c := range m {
		cols = append(cols, c)
	}
	slices.Sort(cols)
	var b strings.Builder
	for i, c := range cols {
		v, err := json.Marshal(m[c])
		if err != nil {
			return "", err
		}
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s=%s", c, v)
	}
	return b.String(), nil
}

// intColumn returns an integer member of a row's JSON object (0 when it is not one).
func intColumn(row []byte, col string) int64 {
	var m map[string]json.RawMessage
	if json.Unmarshal(row, &m) != nil {
		return 0
	}
	n, _ := strconv.ParseInt(string(m[col]), 10, 64)
	return n
}

// column returns one member of a row's JSON object as text (strings unquoted), for indexes.
func column(row []byte, col string) string {
	var m map[string]json.RawMessage
	if json.Unmarshal(row, &m) != nil {
		return ""
	}
	v := m[col]
	var s string
	if json.Unmarshal(v, &s) == nil {
		return s
	}
	return string(v)
}
