//! The ceiling of heartbeat throughput on this machine: a server that does nothing but answer
//! Kafka Heartbeat requests (and ApiVersions, so clients can negotiate) with fixed responses.
//! One thread per connection, as many members as the generator opens.
//!
//! Usage: heartbeat-ceiling [PORT]   (default 0: picks a free port and prints "listening on ...")

use std::io::{self, BufReader, BufWriter, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::thread;

const API_HEARTBEAT: i16 = 12;
const API_VERSIONS: i16 = 18;
const HEARTBEAT_MAX: i16 = 4;
const API_VERSIONS_MAX: i16 = 3;
const UNSUPPORTED_VERSION: i16 = 35;
const MAX_FRAME: usize = 1 << 20;

fn main() -> io::Result<()> {
    let port: u16 = std::env::args()
        .nth(1)
        .map(|p| p.parse().expect("PORT"))
        .unwrap_or(0);
    let listener = TcpListener::bind(("127.0.0.1", port))?;
    println!("listening on {}", listener.local_addr()?);
    io::stdout().flush()?;
    for stream in listener.incoming() {
        let Ok(stream) = stream else { continue };
        // Small stacks: thousands of members means thousands of threads.
        let _ = thread::Builder::new().stack_size(64 * 1024).spawn(move || {
            let _ = serve(stream);
        });
    }
    Ok(())
}

fn serve(stream: TcpStream) -> io::Result<()> {
    stream.set_nodelay(true)?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut writer = BufWriter::new(stream);
    let mut frame = Vec::with_capacity(256);
    let mut out = Vec::with_capacity(256);
    loop {
        let mut size = [0u8; 4];
        reader.read_exact(&mut size)?;
        let size = i32::from_be_bytes(size);
        if size < 8 || size as usize > MAX_FRAME {
            return Ok(()); // not a Kafka request: close, as Kafka does
        }
        frame.resize(size as usize, 0);
        reader.read_exact(&mut frame)?;
        let api_key = i16::from_be_bytes([frame[0], frame[1]]);
        let version = i16::from_be_bytes([frame[2], frame[3]]);
        let correlation = &frame[4..8];
        out.clear();
        out.extend_from_slice(&[0, 0, 0, 0]); // size, filled below
        out.extend_from_slice(correlation);
        match api_key {
            API_HEARTBEAT if (0..=HEARTBEAT_MAX).contains(&version) => heartbeat(&mut out, version),
            API_VERSIONS => api_versions(&mut out, version),
            _ => return Ok(()),
        }
        let len = (out.len() - 4) as i32;
        out[..4].copy_from_slice(&len.to_be_bytes());
        writer.write_all(&out)?;
        writer.flush()?;
    }
}

fn heartbeat(out: &mut Vec<u8>, version: i16) {
    let flexible = version >= 4;
    if flexible {
        out.push(0); // response header v1: no tagged fields
    }
    if version >= 1 {
        out.extend_from_slice(&0i32.to_be_bytes()); // throttle_time_ms
    }
    out.extend_from_slice(&0i16.to_be_bytes()); // error_code NONE
    if flexible {
        out.push(0); // body tagged fields
    }
}

/// ApiVersions: the response header is always v0; above our range, UNSUPPORTED_VERSION in a v0 body.
fn api_versions(out: &mut Vec<u8>, version: i16) {
    let apis = [
        (API_HEARTBEAT, 0, HEARTBEAT_MAX),
        (API_VERSIONS, 0, API_VERSIONS_MAX),
    ];
    let (error, version) = if (0..=API_VERSIONS_MAX).contains(&version) {
        (0i16, version)
    } else {
        (UNSUPPORTED_VERSION, 0)
    };
    out.extend_from_slice(&error.to_be_bytes());
    if version >= 3 {
        out.push(apis.len() as u8 + 1); // compact array length (unsigned varint, n + 1)
    } else {
        out.extend_from_slice(&(apis.len() as i32).to_be_bytes());
    }
    for (key, min, max) in apis {
        out.extend_from_slice(&key.to_be_bytes());
        out.extend_from_slice(&(min as i16).to_be_bytes());
        out.extend_from_slice(&max.to_be_bytes());
        if version >= 3 {
            out.push(0);
        }
    }
    if version >= 1 {
        out.extend_from_slice(&0i32.to_be_bytes()); // throttle_time_ms
    }
    if version >= 3 {
        out.push(0); // body tagged fields
    }
}
