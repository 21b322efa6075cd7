/**
 * Redis Cluster's key slot (CRC16-XMODEM of the key, or of its `{hash tag}`, mod 16384), so the store can
 * check that one decision's keys share a slot and batch decisions per slot.
 */
const TABLE = (() => {
  const table = new Uint16Array(256);
  for (let i = 0; i < 256; i++) {
    let crc = i << 8;
    for (let b = 0; b < 8; b++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
    table[i] = crc;
  }
  return table;
})();

/** The hash slot of `key`. */
export function keySlot(key: string): number {
  let bytes = Buffer.from(key);
  const open = bytes.indexOf(0x7b); // '{'
  if (open >= 0) {
    const close = bytes.indexOf(0x7d, open + 1); // '}'
    if (close > open + 1) bytes = bytes.subarray(open + 1, close);
  }
  let crc = 0;
  for (const byte of bytes) crc = ((crc << 8) & 0xffff) ^ TABLE[((crc >> 8) ^ byte) & 0xff];
  return crc & 16383;
}
