//! The `data` of server-sent events (`text/event-stream`), read from a
//! complete response body: a Streamable HTTP server that answers one POST
//! with a stream ends it after the response, so the client reads it whole.

/// The `data` payload of each event in a complete `text/event-stream`
/// body, in order. Lines end with `\n` or `\r\n`; an event's `data:`
/// lines are joined with `\n`; the one space after the colon is dropped;
/// comments (`:`), `event:`, `id:` and `retry:` lines and events without
/// data (or only whitespace) yield nothing. A last event without its
/// blank line still counts: the body ended.
pub fn data_payloads(body: &[u8]) -> Vec<Vec<u8>> {
    let mut events = Vec::new();
    let mut data: Option<Vec<u8>> = None;
    for raw in body.split(|&b| b == b'\n') {
        let line = raw.strip_suffix(b"\r").unwrap_or(raw);
        if line.is_empty() {
            if let Some(event) = data.take()
                && !event.iter().all(u8::is_ascii_whitespace)
            {
                events.push(event);
            }
            continue;
        }
        if let Some(value) = line.strip_prefix(b"data:") {
            let value = value.strip_prefix(b" ").unwrap_or(value);
            let event = data.get_or_insert_with(Vec::new);
            if !event.is_empty() {
                event.push(b'\n');
            }
            event.extend_from_slice(value);
        }
    }
    if let Some(event) = data
        && !event.iter().all(u8::is_ascii_whitespace)
    {
        events.push(event);
    }
    events
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_streams_yield_each_data_payload() {
        let body = b"event: message\ndata: {\"a\":1}\n\n: comment\ndata: {\"b\":\ndata: 2}\r\n\r\n";
        assert_eq!(
            data_payloads(body),
            vec![b"{\"a\":1}".to_vec(), b"{\"b\":\n2}".to_vec()]
        );
        assert!(data_payloads(b"event: ping\n\n").is_empty());
    }

    #[test]
    fn several_events_come_out_in_order() {
        let body = b"id: 1\nevent: message\ndata: {\"n\":1}\n\nid: 2\ndata: {\"n\":2}\n\ndata: {\"n\":3}\n\n";
        assert_eq!(
            data_payloads(body),
            vec![
                b"{\"n\":1}".to_vec(),
                b"{\"n\":2}".to_vec(),
                b"{\"n\":3}".to_vec()
            ]
        );
    }

    #[test]
    fn comments_and_other_fields_are_not_data() {
        let body = b": keep-alive\nretry: 1000\n:data: not data\nevent: message\ndata: x\n\n:\n\n";
        assert_eq!(data_payloads(body), vec![b"x".to_vec()]);
    }

    #[test]
    fn crlf_lines_and_a_missing_space_are_read_alike() {
        let body = b"data:{\"a\":1}\r\ndata:  two spaces\r\n\r\n";
        assert_eq!(
            data_payloads(body),
            vec![b"{\"a\":1}\n two spaces".to_vec()]
        );
    }

    #[test]
    fn a_last_event_without_its_blank_line_counts_and_empty_data_does_not() {
        assert_eq!(data_payloads(b"data: tail"), vec![b"tail".to_vec()]);
        assert!(data_payloads(b"data:\ndata:  \n\n").is_empty());
        assert!(data_payloads(b"").is_empty());
    }
}
