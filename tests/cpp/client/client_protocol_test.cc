// tests/cpp/client/client_protocol_test.cc: Client against a scripted fake dblogd on 127.0.0.1:
// the handshake (Hello fields, Welcome, Error, anything else), the stream (batches unpacked in
// order, heartbeats, progress, acks on the wire, clean close), and failures: malformed,
// truncated and oversized frames, positions that go backwards, timeouts, interrupts.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "client/client.h"
#include "client/position.h"
#include "fake_server.h"
#include "test_events.h"
#include "wire/frame.h"

namespace dblog::client {
namespace {

using dblog::v1::Change;
using dblog::v1::ClientMessage;
using dblog::v1::Error;
using dblog::v1::StreamEvent;
using namespace dblog::client::testing;
using namespace std::chrono_literals;

constexpr std::int64_t kTime = 1796013963044138;

ConnectOptions Options(std::uint16_t port) {
  ConnectOptions options;
  options.port = port;
  options.consumer = "orders";
  options.connect_timeout = 5s;
  options.io_timeout = 5s;  // no test may wait forever
  return options;
}

// Reads the Hello and answers it with a Welcome; false (with a failure) otherwise.
bool Welcome(FakeConnection& connection) {
  ClientMessage hello;
  if (!connection.Read(&hello)) return false;
  EXPECT_TRUE(hello.has_hello());
  connection.Send(WelcomeMessage());
  return true;
}

StreamEvent InsertEvent(std::uint64_t lsn, std::uint32_t seq, std::int64_t id) {
  StreamEvent event = ChangeEvent(Change::INSERT, 16384, lsn, seq, 771, kTime);
  *event.mutable_change()->mutable_new_row() = MakeRow({Int(id), Text("x")});
  return event;
}

TEST(ClientHandshake, SendsHelloAndKeepsWelcome) {
  FakeServer server([](FakeConnection& connection) {
    ClientMessage message;
    ASSERT_TRUE(connection.Read(&message));
    ASSERT_TRUE(message.has_hello());
    const auto& hello = message.hello();
    EXPECT_EQ(hello.protocol_version(), 1u);
    EXPECT_EQ(hello.consumer(), "orders");
    EXPECT_EQ(hello.token(), "s3cret");
    EXPECT_EQ(hello.client_name(), "test-client/1");
    ASSERT_TRUE(hello.has_resume_after());
    EXPECT_EQ(hello.resume_after().commit_lsn(), 0x500u);
    EXPECT_EQ(hello.resume_after().seq(), 2u);
    auto welcome = WelcomeMessage("dblog_orders");
    welcome.mutable_welcome()->set_slot_created(true);
    welcome.mutable_welcome()->mutable_resume_from()->set_commit_lsn(0x500);
    welcome.mutable_welcome()->mutable_resume_from()->set_seq(2);
    connection.Send(welcome);
    EXPECT_TRUE(connection.WaitForEof());
  });
  ConnectOptions options = Options(server.port());
  options.token = "s3cret";
  options.client_name = "test-client/1";
  dblog::v1::Position resume;
  resume.set_commit_lsn(0x500);
  resume.set_seq(2);
  options.resume_after = resume;
  {
    Client client = Client::Connect(options);
    EXPECT_EQ(client.welcome().slot(), "dblog_orders");
    EXPECT_TRUE(client.welcome().slot_created());
    EXPECT_EQ(client.welcome().resume_from().commit_lsn(), 0x500u);
    Client moved = std::move(client);  // movable; the connection goes with it
    EXPECT_EQ(moved.welcome().server_name(), "dblogd/test");
  }  // destroyed: the connection closes
}

TEST(ClientHandshake, HelloWithoutResumeLeavesItUnset) {
  FakeServer server([](FakeConnection& connection) {
    ClientMessage message;
    ASSERT_TRUE(connection.Read(&message));
    EXPECT_FALSE(message.hello().has_resume_after());
    EXPECT_EQ(message.hello().client_name(), "dblog-client/0.1");
    connection.Send(WelcomeMessage());
  });
  Client client = Client::Connect(Options(server.port()));
}

TEST(ClientHandshake, ErrorAnswerThrowsServerError) {
  FakeServer server([](FakeConnection& connection) {
    ClientMessage hello;
    ASSERT_TRUE(connection.Read(&hello));
    connection.Send(ErrorMessage(Error::AUTH_FAILED, "bad token"));
    connection.Close();
  });
  try {
    Client::Connect(Options(server.port()));
    FAIL() << "Connect succeeded";
  } catch (const ServerError& e) {
    EXPECT_EQ(e.code(), Error::AUTH_FAILED);
    EXPECT_EQ(e.server_message(), "bad token");
    EXPECT_STREQ(e.what(), "dblogd refused: AUTH_FAILED: bad token");
  }
}

TEST(ClientHandshake, UnknownErrorCodeStillNamed) {
  FakeServer server([](FakeConnection& connection) {
    ClientMessage hello;
    ASSERT_TRUE(connection.Read(&hello));
    connection.Send(ErrorMessage(static_cast<Error::Code>(77), "new"));
  });
  try {
    Client::Connect(Options(server.port()));
    FAIL() << "Connect succeeded";
  } catch (const ServerError& e) {
    EXPECT_STREQ(e.what(), "dblogd refused: CODE_77: new");
  }
}

TEST(ClientHandshake, AnythingButWelcomeOrErrorIsAProtocolError) {
  FakeServer server([](FakeConnection& connection) {
    ClientMessage hello;
    ASSERT_TRUE(connection.Read(&hello));
    connection.Send(HeartbeatMessage(1, 0));
  });
  EXPECT_THROW(Client::Connect(Options(server.port())), ProtocolError);
}

TEST(ClientHandshake, WrongProtocolVersionIsRefused) {
  FakeServer server([](FakeConnection& connection) {
    ClientMessage hello;
    ASSERT_TRUE(connection.Read(&hello));
    auto welcome = WelcomeMessage();
    welcome.mutable_welcome()->set_protocol_version(2);
    connection.Send(welcome);
  });
  EXPECT_THROW(Client::Connect(Options(server.port())), ProtocolError);
}

TEST(ClientHandshake, CloseWithoutAnswer) {
  FakeServer server([](FakeConnection& connection) {
    ClientMessage hello;
    ASSERT_TRUE(connection.Read(&hello));
    connection.Close();
  });
  EXPECT_THROW(Client::Connect(Options(server.port())), ProtocolError);
}

TEST(ClientHandshake, ConnectionRefused) {
  try {
    RefusingPort refusing;
    Client::Connect(Options(refusing.port()));
    FAIL() << "Connect succeeded";
  } catch (const TransportError& e) {
    EXPECT_NE(std::string(e.what()).find("cannot connect to dblogd at 127.0.0.1:"),
              std::string::npos)
        << e.what();
  }
}

TEST(ClientHandshake, SilentServerTimesOut) {
  FakeServer server([](FakeConnection& connection) {
    ClientMessage hello;
    ASSERT_TRUE(connection.Read(&hello));
    connection.WaitForEof(5s);  // says nothing until the client gives up
  });
  ConnectOptions options = Options(server.port());
  options.connect_timeout = 200ms;
  const auto start = std::chrono::steady_clock::now();
  EXPECT_THROW(Client::Connect(options), TransportError);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 3s);
}

TEST(ClientStream, UnpacksBatchesInOrderAndAcks) {
  FakeServer server([](FakeConnection& connection) {
    ASSERT_TRUE(Welcome(connection));
    connection.Send(BatchMessage(
        {BeginEvent(0x1000, 771, kTime, 0x1030),
         RelationEvent(16384, "public", "items", {{"id", "integer"}, {"name", "text"}}, {0}),
         InsertEvent(0x1000, 1, 1), InsertEvent(0x1000, 2, 2),
         CommitEvent(0x1000, 3, 771, kTime, 0x1030)}));
    connection.Send(BatchMessage({}));  // an empty batch is nothing, not an end
    connection.Send(HeartbeatMessage(0x1000, 3));
    dblog::v1::ServerMessage progress;
    progress.mutable_progress()->set_phase("bootstrap");
    connection.Send(progress);

    ClientMessage ack;
    ASSERT_TRUE(connection.Read(&ack));
    ASSERT_TRUE(ack.has_ack());
    EXPECT_EQ(ack.ack().position().commit_lsn(), 0x1000u);
    EXPECT_EQ(ack.ack().position().seq(), 3u);
    connection.Close();
  });
  Client client = Client::Connect(Options(server.port()));
  Item item;
  std::vector<StreamEvent::EventCase> kinds;
  std::vector<std::uint32_t> seqs;
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(client.Next(item));
    const auto* event = std::get_if<StreamEvent>(&item);
    ASSERT_NE(event, nullptr);
    kinds.push_back(event->event_case());
    if (event->has_change()) seqs.push_back(event->change().seq());
    if (i < 4) {
      EXPECT_TRUE(client.HasBufferedItems()) << "the rest of the batch is here";
    }
  }
  EXPECT_EQ(kinds, (std::vector<StreamEvent::EventCase>{StreamEvent::kBegin, StreamEvent::kRelation,
                                                        StreamEvent::kChange, StreamEvent::kChange,
                                                        StreamEvent::kCommit}));
  EXPECT_EQ(seqs, (std::vector<std::uint32_t>{1, 2}));

  ASSERT_TRUE(client.Next(item));
  const auto* heartbeat = std::get_if<dblog::v1::Heartbeat>(&item);
  ASSERT_NE(heartbeat, nullptr);
  EXPECT_EQ(heartbeat->position().seq(), 3u);
  EXPECT_EQ(heartbeat->source_lsn(), 0x2000u);
  const dblog::v1::Position heartbeat_position = heartbeat->position();

  ASSERT_TRUE(client.Next(item));
  const auto* progress = std::get_if<dblog::v1::Progress>(&item);
  ASSERT_NE(progress, nullptr);
  EXPECT_EQ(progress->phase(), "bootstrap");

  client.Ack(heartbeat_position);
  EXPECT_FALSE(client.Next(item));  // clean close
  EXPECT_FALSE(client.Next(item));  // and it stays closed
}

// NextRef hands out the same items as Next, without copying them, and mixes with it: each
// reference is read before the next call, as its contract allows, and positions are checked
// the same way.
TEST(ClientStream, NextRefHandsOutTheSameItemsAsNext) {
  FakeServer server([](FakeConnection& connection) {
    ASSERT_TRUE(Welcome(connection));
    connection.Send(BatchMessage({BeginEvent(0x1000, 7, kTime, 0x1030),
                                  CommitEvent(0x1000, 1, 7, kTime, 0x1030)}));
    connection.Send(HeartbeatMessage(0x1000, 1));
    connection.Send(BatchMessage({BeginEvent(0x2000, 8, kTime, 0x2030),
                                  CommitEvent(0x2000, 1, 8, kTime, 0x2030)}));
    connection.Send(BatchMessage({BeginEvent(0x1800, 9, kTime, 0x1830)}));  // goes backwards
    connection.WaitForEof();
  });
  Client client = Client::Connect(Options(server.port()));
  ItemRef ref;
  Item item;
  std::vector<std::string> seen;
  auto describe = [](const StreamEvent& e) {
    const auto pos = Client::PositionOf(e);
    return std::to_string(e.event_case()) + "@" + std::to_string(pos ? pos->commit_lsn() : 0) +
           "#" + std::to_string(pos ? pos->seq() : 0);
  };
  ASSERT_TRUE(client.NextRef(ref));
  seen.push_back(describe(*std::get<const StreamEvent*>(ref)));
  ASSERT_TRUE(client.Next(item));
  seen.push_back(describe(std::get<StreamEvent>(item)));
  ASSERT_TRUE(client.NextRef(ref));
  ASSERT_TRUE(std::holds_alternative<const dblog::v1::Heartbeat*>(ref));
  EXPECT_EQ(std::get<const dblog::v1::Heartbeat*>(ref)->position().commit_lsn(), 0x1000u);
  ASSERT_TRUE(client.NextRef(ref));
  seen.push_back(describe(*std::get<const StreamEvent*>(ref)));
  ASSERT_TRUE(client.NextRef(ref));
  seen.push_back(describe(*std::get<const StreamEvent*>(ref)));
  EXPECT_EQ(seen, (std::vector<std::string>{
                      std::to_string(StreamEvent::kBegin) + "@4096#0",
                      std::to_string(StreamEvent::kCommit) + "@4096#1",
                      std::to_string(StreamEvent::kBegin) + "@8192#0",
                      std::to_string(StreamEvent::kCommit) + "@8192#1"}));
  EXPECT_THROW(client.NextRef(ref), ProtocolError);
}

// NextView hands out the same stream as NextRef: Changes read in place (values as views into
// the frame), a Change not in the canonical form parsed instead, other events parsed, the same
// position checks; it mixes with NextRef (a Change it would view, asked for by NextRef, comes
// parsed).
TEST(ClientStream, NextViewReadsChangesInPlaceAndChecksTheSame) {
  StreamEvent insert = ChangeEvent(dblog::v1::Change::INSERT, 16384, 0x1000, 1, 7, kTime);
  auto* row = insert.mutable_change()->mutable_new_row();
  row->add_values()->set_int_value(-42);
  row->add_values()->set_text_value("na\u00efve");
  row->add_values()->set_null_value(true);
  row->add_values()->set_float8_value(0.1);
  StreamEvent update = ChangeEvent(dblog::v1::Change::UPDATE, 16384, 0x1000, 2, 7, kTime);
  update.mutable_change()->mutable_new_row()->add_values()->set_unchanged(true);
  // the same Change with kind written twice: protobuf keeps the last, a view refuses it
  std::string twice = ChangeEvent(dblog::v1::Change::DELETE, 16384, 0x1000, 3, 7, kTime)
                          .change()
                          .SerializeAsString() +
                      std::string("\x08\x03", 2);  // kind: DELETE again
  // the frame written by hand, so that the odd Change's bytes stay as they are
  const auto field = [](char tag, const std::string& bytes) {
    std::string out(1, tag);
    dblog::common::AppendVarint(out, bytes.size());
    return out + bytes;
  };
  std::string batch;
  for (const std::string& event :
       {BeginEvent(0x1000, 7, kTime, 0x1030).SerializeAsString(), insert.SerializeAsString(),
        update.SerializeAsString(), field('\x1a', twice),  // StreamEvent.change
        ChangeEvent(dblog::v1::Change::DELETE, 16384, 0x1000, 4, 7, kTime).SerializeAsString(),
        CommitEvent(0x1000, 5, 7, kTime, 0x1030).SerializeAsString()})
    batch += field('\x0a', event);  // EventBatch.events
  std::string frame;
  wire::AppendFrame(frame, field('\x1a', batch));  // ServerMessage.events
  FakeServer server([&](FakeConnection& connection) {
    ASSERT_TRUE(Welcome(connection));
    connection.SendRaw(frame);
    connection.Send(HeartbeatMessage(0x1000, 5));
    connection.Send(BatchMessage({ChangeEvent(dblog::v1::Change::INSERT, 16384, 0x3000, 1, 8, kTime),
                                  ChangeEvent(dblog::v1::Change::INSERT, 16384, 0x3000, 2, 8, kTime),
                                  ChangeEvent(dblog::v1::Change::INSERT, 16384, 0x2800, 3, 9, kTime)}));
    connection.WaitForEof();
  });
  Client client = Client::Connect(Options(server.port()));
  ItemView item;
  const auto view = [&]() -> EventView {
    EXPECT_TRUE(client.NextView(item));
    const auto* e = std::get_if<EventView>(&item);
    EXPECT_NE(e, nullptr);
    return e ? *e : EventView{};
  };
  EventView e = view();
  ASSERT_NE(e.event, nullptr);
  EXPECT_TRUE(e.event->has_begin());
  e = view();
  ASSERT_NE(e.change, nullptr) << "a canonical Change is read in place";
  EXPECT_EQ(e.change->kind, dblog::v1::Change::INSERT);
  EXPECT_EQ(e.change->seq, 1u);
  ASSERT_EQ(e.change->new_row.size(), 4u);
  EXPECT_EQ(e.change->new_row[0].integer(), -42);
  EXPECT_EQ(e.change->new_row[1].text(), "na\u00efve");
  EXPECT_EQ(e.change->new_row[2].kind, dblog::v1::Value::kNullValue);
  EXPECT_EQ(e.change->new_row[3].float8(), 0.1);
  e = view();
  ASSERT_NE(e.change, nullptr);
  EXPECT_TRUE(e.change->new_row.HasUnchanged());
  e = view();
  ASSERT_NE(e.event, nullptr) << "a Change not in the canonical form comes parsed";
  EXPECT_EQ(e.event->change().kind(), dblog::v1::Change::DELETE);
  EXPECT_EQ(e.event->change().seq(), 3u);
  ItemRef ref;  // mixed: the next Change, asked for by NextRef, comes parsed
  ASSERT_TRUE(client.NextRef(ref));
  EXPECT_EQ(std::get<const StreamEvent*>(ref)->change().seq(), 4u);
  e = view();
  ASSERT_NE(e.event, nullptr);
  EXPECT_TRUE(e.event->has_commit());
  ASSERT_TRUE(client.NextView(item));
  ASSERT_TRUE(std::holds_alternative<const dblog::v1::Heartbeat*>(item));
  EXPECT_EQ(client.received_through(), 0x2000u);  // the heartbeat's source_lsn
  e = view();
  ASSERT_NE(e.change, nullptr);
  EXPECT_EQ(client.received_through(), 0x3000u) << "a Change read in place counts as received";
  e = view();
  ASSERT_NE(e.change, nullptr);
  EXPECT_THROW(client.NextView(item), ProtocolError) << "a position going backwards";
}

TEST(ClientStream, HasBufferedItemsSaysWhetherNextWouldBlock) {
  FakeServer server([](FakeConnection& connection) {
    ASSERT_TRUE(Welcome(connection));
    connection.Send(BatchMessage(
        {BeginEvent(0x1000, 7, kTime, 0x1030), CommitEvent(0x1000, 1, 7, kTime, 0x1030)}));
    ClientMessage ack;  // nothing more is sent before the client acks
    ASSERT_TRUE(connection.Read(&ack));
    std::string two_frames;  // arrive together: the second is complete once the first is read
    wire::AppendFrame(two_frames, BatchMessage({BeginEvent(0x2000, 8, kTime, 0x2030)}));
    wire::AppendFrame(two_frames, HeartbeatMessage(0x2000, 0));
    wire::AppendVarint(two_frames, wire::kMaxServerFrame + 1);  // then a bad frame header
    connection.SendRaw(two_frames);
    connection.WaitForEof();
  });
  Client client = Client::Connect(Options(server.port()));
  Item item;  // (the first batch may have come with the Welcome: nothing to assert before it)
  ASSERT_TRUE(client.Next(item));
  EXPECT_TRUE(client.HasBufferedItems());
  ASSERT_TRUE(client.Next(item));
  EXPECT_FALSE(client.HasBufferedItems());
  client.Ack(*Client::PositionOf(std::get<StreamEvent>(item)));

  ASSERT_TRUE(client.Next(item));
  EXPECT_TRUE(std::get<StreamEvent>(item).has_begin());
  // The heartbeat frame came in the same read; it is buffered, and asking twice changes nothing.
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  EXPECT_TRUE(client.HasBufferedItems());
  EXPECT_TRUE(client.HasBufferedItems());
  ASSERT_TRUE(client.Next(item));
  EXPECT_TRUE(std::holds_alternative<dblog::v1::Heartbeat>(item));
  // The oversized header counts as buffered (Next reports it without waiting).
  EXPECT_TRUE(client.HasBufferedItems());
  EXPECT_THROW(client.Next(item), ProtocolError);
  EXPECT_LT(std::chrono::steady_clock::now(), deadline);
  EXPECT_FALSE(client.HasBufferedItems());
}

StreamEvent SplitInsert(std::uint64_t lsn, std::uint32_t seq, std::uint64_t text_bytes,
                        std::uint64_t bytes_bytes) {
  StreamEvent event = ChangeEvent(Change::INSERT, 16384, lsn, seq, 7, kTime);
  auto* row = event.mutable_change()->mutable_new_row();
  row->add_values()->set_int_value(1);
  auto* text = row->add_values()->mutable_split();
  text->set_kind(dblog::v1::SplitValue::TEXT);
  text->set_length(text_bytes);
  row->add_values()->set_null_value(true);
  auto* bytes = row->add_values()->mutable_split();
  bytes->set_kind(dblog::v1::SplitValue::BYTES);
  bytes->set_length(bytes_bytes);
  return event;
}

StreamEvent Piece(const std::string& data) {
  StreamEvent event;
  event.mutable_value_piece()->set_data(data);
  return event;
}

// A Change with split values is handed out once its pieces have come, its values whole: the
// pieces in other frames, a heartbeat between them (not handed out: its position could name the
// Change held back, and acknowledging that would skip it), a piece that ends
// one value and starts the next, a text cut inside a character; by Next, NextRef and NextView
// alike. Hello says the client puts values together.
TEST(ClientStream, SplitValuesArePutTogetherAcrossFrames) {
  for (const int way : {0, 1, 2}) {
    SCOPED_TRACE(way);
    FakeServer server([](FakeConnection& connection) {
      ClientMessage hello;
      ASSERT_TRUE(connection.Read(&hello));
      EXPECT_TRUE(hello.hello().split_values());
      connection.Send(WelcomeMessage());
      connection.Send(BatchMessage(
          {BeginEvent(0x1000, 7, kTime, 0x1030),
           RelationEvent(16384, "public", "docs",
                         {{"id", "integer"}, {"t", "text"}, {"n", "text"}, {"b", "bytea"}}, {0}),
           SplitInsert(0x1000, 1, 7, 3)}));
      connection.Send(BatchMessage({Piece("na\xc3")}));
      connection.Send(HeartbeatMessage(0x0800, 0));
      connection.Send(BatchMessage({Piece("\xafve"), Piece(std::string("!\x00\xff\x01", 4))}));
      connection.Send(BatchMessage({CommitEvent(0x1000, 2, 7, kTime, 0x1030)}));
      connection.WaitForEof();
    });
    Client client = Client::Connect(Options(server.port()));
    std::vector<std::string> seen;
    std::string text, bytes;
    for (int i = 0; i < 4; ++i) {
      const StreamEvent* event = nullptr;
      bool heartbeat = false;
      Item item;
      ItemRef ref;
      ItemView view;
      if (way == 0) {
        ASSERT_TRUE(client.Next(item));
        heartbeat = std::holds_alternative<dblog::v1::Heartbeat>(item);
        if (!heartbeat) event = &std::get<StreamEvent>(item);
      } else if (way == 1) {
        ASSERT_TRUE(client.NextRef(ref));
        heartbeat = std::holds_alternative<const dblog::v1::Heartbeat*>(ref);
        if (!heartbeat) event = std::get<const StreamEvent*>(ref);
      } else {
        ASSERT_TRUE(client.NextView(view));
        heartbeat = std::holds_alternative<const dblog::v1::Heartbeat*>(view);
        if (!heartbeat) {
          ASSERT_EQ(std::get<EventView>(view).change, nullptr);  // put together: parsed
          event = std::get<EventView>(view).event;
        }
      }
      if (heartbeat) {
        seen.push_back("heartbeat");
        continue;
      }
      seen.push_back(std::to_string(event->event_case()));
      if (event->has_change()) {
        const auto& row = event->change().new_row();
        ASSERT_EQ(row.values_size(), 4);
        EXPECT_EQ(row.values(0).int_value(), 1);
        text = row.values(1).text_value();
        EXPECT_TRUE(row.values(2).null_value());
        bytes = row.values(3).bytes_value();
      }
    }
    EXPECT_EQ(seen, (std::vector<std::string>{std::to_string(StreamEvent::kBegin),
                                              std::to_string(StreamEvent::kRelation),
                                              std::to_string(StreamEvent::kChange),
                                              std::to_string(StreamEvent::kCommit)}));
    EXPECT_EQ(text, "na\u00efve!");
    EXPECT_EQ(bytes, std::string("\x00\xff\x01", 3));
    EXPECT_EQ(client.split_values_received(), 2u);
  }
}

// A stream that breaks the pieces' rules is a ProtocolError, never a Change with a value
// missing or run into the next one's.
TEST(ClientStream, BrokenSplitValuesAreProtocolErrors) {
  const std::vector<std::pair<std::string, std::vector<StreamEvent>>> cases = {
      {"a piece nothing waits for", {Piece("x")}},
      {"another event before the last piece",
       {SplitInsert(0x1000, 1, 4, 1), Piece("abc"), CommitEvent(0x1000, 2, 7, kTime, 0x1030)}},
      {"more bytes than the values hold", {SplitInsert(0x1000, 1, 2, 1), Piece("abcd")}},
      {"an empty piece", {SplitInsert(0x1000, 1, 2, 1), Piece("")}},
      {"a value longer than PostgreSQL's", {SplitInsert(0x1000, 1, (1ull << 30) + 1, 1)}},
  };
  for (const auto& [what, events] : cases) {
    SCOPED_TRACE(what);
    FakeServer server([&events](FakeConnection& connection) {
      ASSERT_TRUE(Welcome(connection));
      dblog::v1::ServerMessage batch = BatchMessage(
          {BeginEvent(0x1000, 7, kTime, 0x1030),
           RelationEvent(16384, "public", "docs",
                         {{"id", "integer"}, {"t", "text"}, {"n", "text"}, {"b", "bytea"}}, {0})});
      for (const auto& e : events) *batch.mutable_events()->add_events() = e;
      connection.Send(batch);
      connection.WaitForEof();
    });
    Client client = Client::Connect(Options(server.port()));
    Item item;
    ASSERT_TRUE(client.Next(item));  // Begin
    ASSERT_TRUE(client.Next(item));  // Relation
    EXPECT_THROW(client.Next(item), ProtocolError);
  }
}

// WaitForItems: false when nothing came within its time (the read stays pending: an Ack goes out
// at once meanwhile, and the next item is not lost), true as soon as something arrives.
TEST(ClientStream, WaitForItemsWaitsAtMostItsTimeAndLosesNothing) {
  FakeServer server([](FakeConnection& connection) {
    ASSERT_TRUE(Welcome(connection));
    connection.Send(BatchMessage(
        {BeginEvent(0x1000, 7, kTime, 0x1030), CommitEvent(0x1000, 1, 7, kTime, 0x1030)}));
    ClientMessage ack;  // nothing more is sent before the client acks
    ASSERT_TRUE(connection.Read(&ack));
    EXPECT_EQ(ack.ack().position().commit_lsn(), 0x1000u);
    std::this_thread::sleep_for(2s);
    connection.Send(HeartbeatMessage(0x2000, 0));
    connection.WaitForEof();
  });
  Client client = Client::Connect(Options(server.port()));
  Item item;
  ASSERT_TRUE(client.Next(item));
  ASSERT_TRUE(client.Next(item));
  EXPECT_FALSE(client.HasBufferedItems());
  auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(client.WaitForItems(50ms));  // the server waits for the ack
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
  // With the read left pending, an Ack is not held up by it.
  start = std::chrono::steady_clock::now();
  client.Ack(*Client::PositionOf(std::get<StreamEvent>(item)));
  EXPECT_LT(std::chrono::steady_clock::now() - start, 1s);
  EXPECT_TRUE(client.WaitForItems(5s));  // the heartbeat, 2 s after the ack
  ASSERT_TRUE(client.Next(item));
  ASSERT_TRUE(std::holds_alternative<dblog::v1::Heartbeat>(item));
  EXPECT_EQ(std::get<dblog::v1::Heartbeat>(item).position().commit_lsn(), 0x2000u);
}

TEST(ClientStream, FramesSplitIntoSingleBytesAreReassembled) {
  FakeServer server([](FakeConnection& connection) {
    ASSERT_TRUE(Welcome(connection));
    std::string bytes;
    wire::AppendFrame(bytes, BatchMessage({BeginEvent(0x1000, 7, kTime, 0x1030),
                                           CommitEvent(0x1000, 1, 7, kTime, 0x1030)}));
    for (const char c : bytes) {
      connection.SendRaw(std::string_view(&c, 1));
      std::this_thread::sleep_for(1ms);
    }
    connection.Close();
  });
  Client client = Client::Connect(Options(server.port()));
  Item item;
  ASSERT_TRUE(client.Next(item));
  EXPECT_TRUE(std::get<StreamEvent>(item).has_begin());
  ASSERT_TRUE(client.Next(item));
  EXPECT_TRUE(std::get<StreamEvent>(item).has_commit());
  EXPECT_FALSE(client.Next(item));
}

TEST(ClientStream, ErrorFrameThrowsServerError) {
  FakeServer server([](FakeConnection& connection) {
    ASSERT_TRUE(Welcome(connection));
    connection.Send(HeartbeatMessage(0, 0));
    connection.Send(ErrorMessage(Error::SHUTTING_DOWN, "bye"));
    connection.Close();
  });
  Client client = Client::Connect(Options(server.port()));
  Item item;
  ASSERT_TRUE(client.Next(item));
  try {
    client.Next(item);
    FAIL() << "no ServerError";
  } catch (const ServerError& e) {
    EXPECT_EQ(e.code(), Error::SHUTTING_DOWN);
    EXPECT_STREQ(e.what(), "dblogd refused: SHUTTING_DOWN: bye");
  }
  EXPECT_THROW(client.Next(item), ProtocolError);  // the connection is done for
}

TEST(ClientStream, TruncatedFrameIsAProtocolError) {
  FakeServer server([](FakeConnection& connection) {
    ASSERT_TRUE(Welcome(connection));
    std::string bytes;
    wire::AppendFrame(bytes, BatchMessage({BeginEvent(0x1000, 7, kTime, 0x1030)}));
    connection.SendRaw(std::string_view(bytes).substr(0, bytes.size() - 3));
    connection.Close();
  });
  Client client = Client::Connect(Options(server.port()));
  Item item;
  try {
    client.Next(item);
    FAIL() << "no ProtocolError";
  } catch (const ProtocolError& e) {
    EXPECT_NE(std::string(e.what()).find("in the middle of a frame"), std::string::npos)
        << e.what();
  }
}

TEST(ClientStream, MalformedFrameIsAProtocolError) {
  FakeServer server([](FakeConnection& connection) {
    ASSERT_TRUE(Welcome(connection));
    std::string bytes;
    wire::AppendFrame(bytes, std::string_view("\x1a\x05\x0a", 3));  // events: 5 bytes, 1 there
    connection.SendRaw(bytes);
    connection.WaitForEof();
  });
  Client client = Client::Connect(Options(server.port()));
  Item item;
  try {
    client.Next(item);
    FAIL() << "no ProtocolError";
  } catch (const ProtocolError& e) {
    EXPECT_NE(std::string(e.what()).find("malformed ServerMessage"), std::string::npos) << e.what();
  }
}

TEST(ClientStream, OversizedFrameIsRefusedBeforeItArrives) {
  FakeServer server([](FakeConnection& connection) {
    ASSERT_TRUE(Welcome(connection));
    std::string header;
    wire::AppendVarint(header, wire::kMaxServerFrame + 1);
    connection.SendRaw(header);
    connection.WaitForEof();
  });
  Client client = Client::Connect(Options(server.port()));
  Item item;
  try {
    client.Next(item);
    FAIL() << "no ProtocolError";
  } catch (const ProtocolError& e) {
    EXPECT_NE(std::string(e.what()).find("exceeds the limit"), std::string::npos) << e.what();
  }
}

TEST(ClientStream, UnknownMessageKindIsAProtocolError) {
  FakeServer server([](FakeConnection& connection) {
    ASSERT_TRUE(Welcome(connection));
    connection.SendRaw(std::string_view("\x03\xf8\x01\x01", 4));  // only field 31: unknown
    connection.WaitForEof();
  });
  Client client = Client::Connect(Options(server.port()));
  Item item;
  EXPECT_THROW(client.Next(item), ProtocolError);
}

TEST(ClientStream, UnknownEventKindIsAProtocolError) {
  FakeServer server([](FakeConnection& connection) {
    ASSERT_TRUE(Welcome(connection));
    connection.Send(BatchMessage({StreamEvent()}));
    connection.WaitForEof();
  });
  Client client = Client::Connect(Options(server.port()));
  Item item;
  EXPECT_THROW(client.Next(item), ProtocolError);
}

TEST(ClientStream, PositionsMustIncrease) {
  FakeServer server([](FakeConnection& connection) {
    ASSERT_TRUE(Welcome(connection));
    connection.Send(BatchMessage({InsertEvent(0x2000, 2, 1), InsertEvent(0x2000, 2, 2)}));
    connection.WaitForEof();
  });
  Client client = Client::Connect(Options(server.port()));
  Item item;
  ASSERT_TRUE(client.Next(item));
  EXPECT_THROW(client.Next(item), ProtocolError);
}

TEST(ClientStream, NothingAtOrBeforeResumeFrom) {
  FakeServer server([](FakeConnection& connection) {
    ClientMessage hello;
    ASSERT_TRUE(connection.Read(&hello));
    auto welcome = WelcomeMessage();
    welcome.mutable_welcome()->mutable_resume_from()->set_commit_lsn(0x2000);
    welcome.mutable_welcome()->mutable_resume_from()->set_seq(5);
    connection.Send(welcome);
    connection.Send(BatchMessage({InsertEvent(0x2000, 5, 1)}));
    connection.WaitForEof();
  });
  Client client = Client::Connect(Options(server.port()));
  Item item;
  EXPECT_THROW(client.Next(item), ProtocolError);
}

TEST(ClientStream, NothingAtOrBeforeResumeAfter) {
  FakeServer server([](FakeConnection& connection) {
    ASSERT_TRUE(Welcome(connection));  // resume_from left unset
    connection.Send(BatchMessage({InsertEvent(0x2000, 5, 1)}));
    connection.WaitForEof();
  });
  ConnectOptions options = Options(server.port());
  dblog::v1::Position resume;
  resume.set_commit_lsn(0x2000);
  resume.set_seq(5);
  options.resume_after = resume;
  Client client = Client::Connect(options);
  Item item;
  EXPECT_THROW(client.Next(item), ProtocolError);  // (0x2000, 5) is the resume point itself
}

// Resuming inside a transaction: its Begin comes first at (commit_lsn, 0), at or before the
// resume point; then only positions after the resume point. Only that transaction's Begin, and
// only first.
TEST(ClientStream, TheBeginOfTheTransactionResumedInsideComesFirst) {
  FakeServer server([](FakeConnection& connection) {
    ASSERT_TRUE(Welcome(connection));
    connection.Send(BatchMessage({BeginEvent(0x2000, 771, kTime, 0x2100), InsertEvent(0x2000, 6, 1),
                                  CommitEvent(0x2000, 7, 771, kTime, 0x2100)}));
    connection.WaitForEof();
  });
  ConnectOptions options = Options(server.port());
  options.resume_after = client::MakePosition(0x2000, 5);
  Client client = Client::Connect(options);
  Item item;
  ASSERT_TRUE(client.Next(item));
  EXPECT_TRUE(std::get<StreamEvent>(item).has_begin());
  ASSERT_TRUE(client.Next(item));
  EXPECT_EQ(std::get<StreamEvent>(item).change().seq(), 6u);
  ASSERT_TRUE(client.Next(item));
  EXPECT_TRUE(std::get<StreamEvent>(item).has_commit());
  EXPECT_EQ(client.received_through(), 0x2100u);
}

TEST(ClientStream, ABeginBeforeTheResumePointOfAnotherTransactionIsRefused) {
  for (const std::uint64_t lsn : {0x1000u, 0x2000u}) {
    FakeServer server([lsn](FakeConnection& connection) {
      ASSERT_TRUE(Welcome(connection));
      // 0x1000: another transaction's Begin; 0x2000: the right one, but not first
      if (lsn == 0x1000) {
        connection.Send(BatchMessage({BeginEvent(lsn, 771, kTime, lsn + 0x100)}));
      } else {
        connection.Send(BatchMessage({InsertEvent(0x2000, 6, 1), BeginEvent(lsn, 771, kTime, 0)}));
      }
      connection.WaitForEof();
    });
    ConnectOptions options = Options(server.port());
    options.resume_after = client::MakePosition(0x2000, 5);
    Client client = Client::Connect(options);
    Item item;
    if (lsn == 0x2000) {
      ASSERT_TRUE(client.Next(item));
    }
    EXPECT_THROW(client.Next(item), ProtocolError) << lsn;
  }
}

// received_through: what was had before (resume_from), then each later transaction's
// commit_lsn, a Commit's end_lsn, a heartbeat's source_lsn; a bootstrap counts only at its end.
TEST(ClientStream, ReceivedThroughFollowsTheStreamAndHeartbeats) {
  FakeServer server([](FakeConnection& connection) {
    ClientMessage hello;
    ASSERT_TRUE(connection.Read(&hello));
    dblog::v1::ServerMessage welcome = WelcomeMessage();
    *welcome.mutable_welcome()->mutable_resume_from() = client::MakePosition(0x500, 3);
    connection.Send(welcome);
    connection.Send(HeartbeatMessage(0x500, 3));  // source_lsn 0x1500
    connection.Send(BatchMessage({BeginEvent(0x2000, 771, kTime, 0x2100), InsertEvent(0x2000, 1, 1),
                                  CommitEvent(0x2000, 2, 771, kTime, 0x2100)}));
    dblog::v1::StreamEvent begin;
    begin.mutable_bootstrap_begin()->set_consistent_point(0x9000);
    dblog::v1::StreamEvent row = ChangeEvent(Change::READ, 16384, 0x8FFF, 1, 0, 0);
    dblog::v1::StreamEvent end;
    end.mutable_bootstrap_end()->set_consistent_point(0x9000);
    end.mutable_bootstrap_end()->set_commit_lsn(0x8FFF);
    end.mutable_bootstrap_end()->set_seq(2);
    connection.Send(BatchMessage({begin, row}));
    connection.Send(HeartbeatMessage(0x8FFF, 1));  // source_lsn 0x9FFF: ignored inside
    connection.Send(BatchMessage({end}));
    connection.WaitForEof();
  });
  Client client = Client::Connect(Options(server.port()));
  EXPECT_EQ(client.received_through(), 0x500u);
  Item item;
  ASSERT_TRUE(client.Next(item));  // heartbeat
  EXPECT_EQ(client.received_through(), 0x1500u);
  EXPECT_TRUE(client.CaughtUp(0x1500));
  EXPECT_FALSE(client.CaughtUp(0x1501));
  ASSERT_TRUE(client.Next(item));  // Begin
  EXPECT_EQ(client.received_through(), 0x2000u);
  ASSERT_TRUE(client.Next(item));  // insert
  ASSERT_TRUE(client.Next(item));  // Commit
  EXPECT_EQ(client.received_through(), 0x2100u);
  ASSERT_TRUE(client.Next(item));  // BootstrapBegin
  ASSERT_TRUE(client.Next(item));  // a copied row
  ASSERT_TRUE(client.Next(item));  // heartbeat inside the bootstrap
  EXPECT_EQ(client.received_through(), 0x2100u);
  ASSERT_TRUE(client.Next(item));  // BootstrapEnd
  EXPECT_EQ(client.received_through(), 0x9000u);
}

TEST(ClientStream, SilenceBeyondIoTimeoutFails) {
  FakeServer server([](FakeConnection& connection) {
    ASSERT_TRUE(Welcome(connection));
    connection.WaitForEof(5s);
  });
  ConnectOptions options = Options(server.port());
  options.io_timeout = 200ms;
  Client client = Client::Connect(options);
  Item item;
  const auto start = std::chrono::steady_clock::now();
  EXPECT_THROW(client.Next(item), TransportError);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 3s);
}

TEST(ClientStream, AcksMustNotGoBackwards) {
  FakeServer server([](FakeConnection& connection) {
    ASSERT_TRUE(Welcome(connection));
    ClientMessage ack;
    ASSERT_TRUE(connection.Read(&ack));
    EXPECT_EQ(ack.ack().position().seq(), 4u);
    ASSERT_TRUE(connection.Read(&ack));  // an equal ack is allowed; the backward one never came
    EXPECT_EQ(ack.ack().position().seq(), 4u);
    EXPECT_TRUE(connection.WaitForEof());
  });
  {
    Client client = Client::Connect(Options(server.port()));
    dblog::v1::Position position;
    position.set_commit_lsn(0x3000);
    position.set_seq(4);
    client.Ack(position);
    dblog::v1::Position older = position;
    older.set_seq(3);
    EXPECT_THROW(client.Ack(older), std::invalid_argument);
    client.Ack(position);
  }
}

TEST(ClientInterrupt, StopsABlockedNextAndAllowsAFinalAck) {
  FakeServer server([](FakeConnection& connection) {
    ASSERT_TRUE(Welcome(connection));
    ClientMessage ack;
    ASSERT_TRUE(connection.Read(&ack, 5s));  // sent after the interrupt
    EXPECT_EQ(ack.ack().position().commit_lsn(), 0x4000u);
    EXPECT_TRUE(connection.WaitForEof());
  });
  auto interrupter = std::make_shared<Interrupter>();
  ConnectOptions options = Options(server.port());
  options.io_timeout = 0ms;  // only the interrupt can end the wait
  {
    Client client = Client::Connect(options, interrupter);
    std::thread stopper([interrupter] {
      std::this_thread::sleep_for(100ms);
      interrupter->Interrupt();
    });
    Item item;
    const auto start = std::chrono::steady_clock::now();
    EXPECT_THROW(client.Next(item), Interrupted);
    EXPECT_LT(std::chrono::steady_clock::now() - start, 3s);
    stopper.join();
    dblog::v1::Position position;
    position.set_commit_lsn(0x4000);
    client.Ack(position);
    EXPECT_THROW(client.Next(item), ProtocolError);  // no reads after an interrupt
  }
}

TEST(ClientInterrupt, InterruptBeforeConnect) {
  auto interrupter = std::make_shared<Interrupter>();
  interrupter->Interrupt();
  interrupter->Interrupt();  // idempotent
  EXPECT_TRUE(interrupter->interrupted());
  RefusingPort refusing;
  EXPECT_THROW(Client::Connect(Options(refusing.port()), interrupter), Interrupted);
}

}  // namespace
}  // namespace dblog::client
