package io.statecast.client;

import com.google.protobuf.ByteString;
import com.google.protobuf.InvalidProtocolBufferException;
import io.grpc.MethodDescriptor;
import io.grpc.Status;
import io.grpc.protobuf.ProtoUtils;
import statecast.v1.PlayerGrpc;
import statecast.v1.PlayerOuterClass.SubscribeManyRequest;
import statecast.v1.PlayerOuterClass.SubscribeRequest;
import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.InputStream;

/**
 * Subscribe's responses as bytes, and the entries of a batch read from them in place.
 *
 * <p>Why: a snapshot is most of a cold start's frames, and the generated parser makes an
 * {@code Entry} per row, with its key and value copied into byte strings, its view and
 * source position decoded into strings and its source time into a message — objects the
 * client drops at once, since a snapshot row is kept as bytes ({@link SnapshotRows}). The
 * receive thread reads a batch's entries in place instead ({@link #batch}); every other
 * frame is parsed by the generated code ({@code SubscribeResponse.parseFrom}). The reading
 * follows protobuf's rules for what it reads: the last value of a field wins, a field of an
 * unexpected wire type is an unknown field, unknown fields are skipped, a string must be
 * UTF-8 and an embedded message well-formed. A frame it does not take (anything but a batch
 * and a head index) or finds malformed goes to the generated parser whole, which decides.
 */
final class Frames {
  private Frames() {}

  /** Subscribe, with its responses as their bytes. */
  static final MethodDescriptor<SubscribeRequest, byte[]> SUBSCRIBE = PlayerGrpc.getSubscribeMethod()
      .toBuilder(ProtoUtils.marshaller(SubscribeRequest.getDefaultInstance()), new Raw()).build();

  /** SubscribeMany, with its responses as their bytes. */
  static final MethodDescriptor<SubscribeManyRequest, byte[]> SUBSCRIBE_MANY = PlayerGrpc.getSubscribeManyMethod()
      .toBuilder(ProtoUtils.marshaller(SubscribeManyRequest.getDefaultInstance()), new Raw()).build();

  /** A SubscribeManyResponse read in place: its channel, and its response in b[response, responseEnd). */
  record ManyFrame(int channel, int response, int responseEnd) {}

  /**
   * Reads b as a SubscribeManyResponse with a channel and one response; null when it is
   * anything else (an end, a field twice, an unknown field) or malformed: the generated
   * parser's. The response itself is not read here.
   */
  static ManyFrame many(byte[] b) {
    try {
      Reader r = new Reader(b, 0, b.length);
      int channel = 0;
      int response = -1;
      int end = -1;
      while (r.more()) {
        int tag = r.tag();
        if (tag == 1 << 3) {
          channel = (int) r.varint();
        } else if (tag == (2 << 3 | 2) && response < 0) {
          int n = r.length();
          response = r.pos;
          end = response + n;
          r.pos = end;
        } else {
          return null;
        }
      }
      return response < 0 ? null : new ManyFrame(channel, response, end);
    } catch (InvalidProtocolBufferException e) {
      return null;
    }
  }

  private static final class Raw implements MethodDescriptor.Marshaller<byte[]> {
    @Override
    public InputStream stream(byte[] value) {
      return new ByteArrayInputStream(value);
    }

    @Override
    public byte[] parse(InputStream in) {
      try {
        return in.readAllBytes();
      } catch (IOException e) {
        throw Status.INTERNAL.withDescription("reading a response: " + e).withCause(e).asRuntimeException();
      }
    }
  }

  /** One entry of a batch, as read: offsets into the frame's bytes (length -1: absent). */
  static final class Entry {
    int off; // the entry's own bytes: [off, end)
    int end;
    long index;
    int kind;
    long epoch;
    boolean tombstone;
    boolean txn;
    int view;
    int viewLen;
    int key;
    int keyLen;
    int value;
    int valueLen;

    void reset(int off, int end) {
      this.off = off;
      this.end = end;
      index = 0;
      kind = 0;
      epoch = 0;
      tombstone = false;
      txn = false;
      view = off;
      viewLen = 0;
      key = off;
      keyLen = 0;
      value = off;
      valueLen = 0;
    }
  }

  /** What {@link #batch} calls for each entry. */
  interface EntryVisitor {
    void entry(byte[] b, Entry e) throws InvalidProtocolBufferException;
  }

  /**
   * Reads b as a SubscribeResponse carrying a batch: calls f for each entry, in order, and
   * returns the head index. Returns -1, having called nothing, when b is not a response
   * with a batch and at most a head index besides. Bytes it finds malformed throw where they
   * are met, after the calls for the entries before: the caller then gives the frame to the
   * generated parser, which refuses it too or reads the same entries again from the first.
   */
  static long batch(byte[] b, EntryVisitor f) throws InvalidProtocolBufferException {
    return batch(b, 0, b.length, f);
  }

  /** batch, of the response in b[off, end). */
  static long batch(byte[] b, int off, int end, EntryVisitor f) throws InvalidProtocolBufferException {
    Reader r = new Reader(b, off, end);
    long head = 0;
    int batch = -1;
    int batchEnd = -1;
    while (r.more()) {
      int tag = r.tag();
      int field = tag >>> 3;
      int wt = tag & 7;
      if (field == 1 && wt == 2 && batch < 0) {
        int n = r.length();
        batch = r.pos;
        batchEnd = batch + n;
        r.pos = batchEnd;
      } else if (field == 10 && wt == 0) {
        head = r.varint();
      } else {
        return -1; // another message, a second batch (merged), a topic ID: the generated parser's
      }
    }
    if (batch < 0) {
      return -1;
    }
    Entry e = new Entry();
    Reader br = new Reader(b, batch, batchEnd);
    while (br.more()) {
      int tag = br.tag();
      if (tag >>> 3 == 1 && (tag & 7) == 2) {
        int n = br.length();
        e.reset(br.pos, br.pos + n);
        entry(b, e);
        br.pos = e.end;
        f.entry(b, e);
      } else {
        br.skip(tag);
      }
    }
    return head;
  }

  private static void entry(byte[] b, Entry e) throws InvalidProtocolBufferException {
    Reader r = new Reader(b, e.off, e.end);
    while (r.more()) {
      int tag = r.tag();
      int wt = tag & 7;
      switch (tag >>> 3) {
        case 1 -> {
          if (wt != 0) {
            r.skip(tag);
          } else {
            e.index = r.varint();
          }
        }
        case 2, 3, 5, 9 -> {
          if (wt != 2) {
            r.skip(tag);
            continue;
          }
          int n = r.length();
          int at = r.pos;
          r.pos += n;
          switch (tag >>> 3) {
            case 2 -> {
              e.key = at;
              e.keyLen = n;
            }
            case 3 -> {
              e.value = at;
              e.valueLen = n;
            }
            case 5 -> {
              utf8(b, at, n);
              e.view = at;
              e.viewLen = n;
            }
            default -> utf8(b, at, n); // source_lsn
          }
        }
        case 4, 10 -> {
          if (wt != 0) {
            r.skip(tag);
          } else if (tag >>> 3 == 4) {
            e.tombstone = r.varint() != 0;
          } else {
            e.txn = r.varint() != 0;
          }
        }
        case 6 -> {
          if (wt != 0) {
            r.skip(tag);
          } else {
            e.kind = (int) r.varint();
          }
        }
        case 7 -> {
          if (wt != 0) {
            r.skip(tag);
          } else {
            e.epoch = r.varint();
          }
        }
        case 8 -> {
          if (wt != 2) {
            r.skip(tag);
            continue;
          }
          int n = r.length();
          Reader m = new Reader(b, r.pos, r.pos + n); // source_time: well-formed, not read
          while (m.more()) {
            m.skip(m.tag());
          }
          r.pos += n;
        }
        default -> r.skip(tag);
      }
    }
  }

  private static void utf8(byte[] b, int at, int n) throws InvalidProtocolBufferException {
    for (int i = at; i < at + n; i++) {
      if (b[i] < 0) {
        if (!ByteString.copyFrom(b, at, n).isValidUtf8()) {
          throw new InvalidProtocolBufferException("Protocol message had invalid UTF-8.");
        }
        return;
      }
    }
  }

  /** The view an entry names, among names (UTF-8); -1 when none. */
  static int viewOf(byte[] b, Entry e, byte[][] names) {
    for (int i = 0; i < names.length; i++) {
      byte[] n = names[i];
      if (n.length == e.viewLen && java.util.Arrays.equals(n, 0, n.length, b, e.view, e.view + e.viewLen)) {
        return i;
      }
    }
    return -1;
  }

  /** Protocol buffer wire reading over b[pos, end). */
  private static final class Reader {
    final byte[] b;
    int pos;
    final int end;

    Reader(byte[] b, int pos, int end) {
      this.b = b;
      this.pos = pos;
      this.end = end;
    }

    boolean more() {
      return pos < end;
    }

    // At most ten bytes, the last not continued: protobuf-java takes some varints whose
    // tenth byte continues (on its fast path) and refuses others; such a frame goes to it.
    long varint() throws InvalidProtocolBufferException {
      long x = 0;
      for (int shift = 0; shift < 64; shift += 7) {
        if (pos >= end) {
          throw truncated();
        }
        byte c = b[pos++];
        x |= (long) (c & 0x7f) << shift;
        if (c >= 0) {
          return x;
        }
      }
      throw new InvalidProtocolBufferException("CodedInputStream encountered a malformed varint.");
    }

    // As CodedInputStream: a tag and a length are the low 32 bits of their varint.
    int tag() throws InvalidProtocolBufferException {
      int t = (int) varint();
      if (t >>> 3 == 0) {
        throw new InvalidProtocolBufferException("Protocol message contained an invalid tag (zero).");
      }
      return t;
    }

    int length() throws InvalidProtocolBufferException {
      int n = (int) varint();
      if (n < 0) {
        throw new InvalidProtocolBufferException("CodedInputStream encountered an embedded string or message which claimed to have negative size.");
      }
      if (n > end - pos) {
        throw truncated();
      }
      return n;
    }

    void skip(int tag) throws InvalidProtocolBufferException {
      skip(tag, 0);
    }

    private void skip(int tag, int depth) throws InvalidProtocolBufferException {
      switch (tag & 7) {
        case 0 -> varint();
        case 1 -> fixed(8);
        case 2 -> {
          int n = length(); // before pos is read: pos += length() would add to the old pos
          pos += n;
        }
        case 5 -> fixed(4);
        case 3 -> { // a group: skipped to its end tag
          if (depth >= 100) {
            throw new InvalidProtocolBufferException("Protocol message had too many levels of nesting.");
          }
          while (true) {
            if (!more()) {
              throw truncated();
            }
            int t = tag();
            if ((t & 7) == 4) {
              if (t >>> 3 != tag >>> 3) {
                throw new InvalidProtocolBufferException("Protocol message end-group tag did not match expected tag.");
              }
              return;
            }
            skip(t, depth + 1);
          }
        }
        default -> throw new InvalidProtocolBufferException("Protocol message tag had invalid wire type.");
      }
    }

    private void fixed(int n) throws InvalidProtocolBufferException {
      if (end - pos < n) {
        throw truncated();
      }
      pos += n;
    }

    private static InvalidProtocolBufferException truncated() {
      return new InvalidProtocolBufferException("While parsing a protocol message, the input ended unexpectedly.");
    }
  }
}
