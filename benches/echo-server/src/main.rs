//! A minimal Kafka-framed echo server: the fastest an ApiVersions answer can be on this machine.
//!
//! Every frame (int32 size + request) is answered with the same response body, behind the
//! request's correlation id; nothing is decoded. One thread per connection, all complete frames of
//! a read answered with one write. `benches/apiversions_load.py` runs the same load against it and
//! against corral, so corral's number can be read as a share of this ceiling.
//!
//! Usage: corral-echo-server ADDR RESPONSE_BODY_HEX LIFETIME_SECONDS
//! Prints `listening on HOST:PORT`, exits by itself after LIFETIME_SECONDS.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;
use std::{env, process, thread};

const MAX_FRAME: usize = 1 << 20;

fn main() {
    let args: Vec<String> = env::args().collect();
    if args.len() != 4 {
        eprintln!("usage: {} ADDR RESPONSE_BODY_HEX LIFETIME_SECONDS", args[0]);
        process::exit(2);
    }
    let body = decode_hex(&args[2]).unwrap_or_else(|| {
        eprintln!("RESPONSE_BODY_HEX is not hex");
        process::exit(2)
    });
    let lifetime: u64 = args[3].parse().expect("LIFETIME_SECONDS");
    let listener = TcpListener::bind(&args[1]).expect("bind");
    println!(
        "listening on {}",
        listener.local_addr().expect("local addr")
    );
    thread::spawn(move || {
        thread::sleep(Duration::from_secs(lifetime));
        process::exit(0);
    });
    for stream in listener.incoming().flatten() {
        let body = body.clone();
        thread::spawn(move || {
            let _ = serve(stream, &body);
        });
    }
}

fn serve(mut stream: TcpStream, body: &[u8]) -> std::io::Result<()> {
    stream.set_nodelay(true)?;
    let mut buf = vec![0u8; 1 << 16];
    let (mut start, mut end) = (0usize, 0usize);
    let mut out = Vec::with_capacity(1 << 16);
    loop {
        if end == buf.len() {
            buf.copy_within(start..end, 0);
            end -= start;
            start = 0;
            if end == buf.len() {
                buf.resize(buf.len() * 2, 0);
            }
        }
        let n = stream.read(&mut buf[end..])?;
        if n == 0 {
            return Ok(());
        }
        end += n;
        while end - start >= 4 {
            let size = i32::from_be_bytes(buf[start..start + 4].try_into().unwrap());
            if size < 8 || size as usize > MAX_FRAME {
                return Ok(()); // not a request: close, as a broker would
            }
            let size = size as usize;
            if end - start < 4 + size {
                break;
            }
            let correlation_id = &buf[start + 8..start + 12];
            out.extend_from_slice(&((4 + body.len()) as i32).to_be_bytes());
            out.extend_from_slice(correlation_id);
            out.extend_from_slice(body);
            start += 4 + size;
        }
        if start == end {
            start = 0;
            end = 0;
        }
        if !out.is_empty() {
            stream.write_all(&out)?;
            out.clear();
        }
    }
}

fn decode_hex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).ok())
        .collect()
}
