import { createHash } from 'node:crypto';
import sharp, { type Metadata } from 'sharp';
import { FileError } from './errors.js';

/** The types a board keeps. A GIF is kept as a PNG of its first frame. */
export const STORED_TYPES = ['image/png', 'image/jpeg', 'image/webp'] as const;
export type StoredType = (typeof STORED_TYPES)[number];
/** What an upload may be, told from its first bytes. */
export type SniffedType = StoredType | 'image/gif';

export interface CheckedImage {
  /** hex sha-256 of `bytes`: the file's id */
  id: string;
  type: StoredType;
  bytes: Buffer;
  width: number;
  height: number;
}

export interface CheckLimits {
  /** decoded pixels above which an image is refused, read from its header before anything is decoded */
  maxPixels: number;
}

// libvips keeps decoded images and open files in a cache for reuse; every upload is a new image
sharp.cache(false);

/**
 * The type of an upload from its magic bytes (never from its name or the
 * request's Content-Type): PNG, JPEG, GIF, WebP, or null for anything else.
 */
export function sniff(b: Buffer): SniffedType | null {
  if (b.length >= 8 && b.readUInt32BE(0) === 0x89504e47 && b.readUInt32BE(4) === 0x0d0a1a0a) return 'image/png';
  if (b.length >= 3 && b[0] === 0xff && b[1] === 0xd8 && b[2] === 0xff) return 'image/jpeg';
  if (b.length >= 6 && (b.subarray(0, 6).toString('latin1') === 'GIF87a' || b.subarray(0, 6).toString('latin1') === 'GIF89a')) return 'image/gif';
  if (b.length >= 12 && b.subarray(0, 4).toString('latin1') === 'RIFF' && b.subarray(8, 12).toString('latin1') === 'WEBP') return 'image/webp';
  return null;
}

/** Markup (SVG, HTML, XML) gets its own sentence: people expect an SVG to work. */
const looksLikeMarkup = (b: Buffer): boolean => /^(\xef\xbb\xbf)?\s*</.test(b.subarray(0, 256).toString('latin1'));

const SHARP_FORMAT: Record<SniffedType, string> = { 'image/png': 'png', 'image/jpeg': 'jpeg', 'image/gif': 'gif', 'image/webp': 'webp' };

/**
 * Checks an upload and re-encodes it, or throws FileError (docs/board.md,
 * "Images and PDFs"):
 *
 * 1. the type from its bytes: PNG, JPEG, WebP, GIF; SVG, HTML and anything else
 *    are refused (`unsupported_type`); a Content-Type that names another image
 *    type than the bytes are is refused (`type_mismatch`);
 * 2. its dimensions from the header, before anything is decoded: over
 *    `maxPixels` refused (`too_many_pixels`: a 100-byte PNG can claim
 *    50,000 x 50,000, 10 GB decoded);
 * 3. decoded and re-encoded by sharp (libvips), which keeps no metadata
 *    (EXIF with its GPS position, XMP, comments: none reach the others), turns
 *    the image upright by its EXIF orientation first, and keeps only the first
 *    frame of an animation. Whatever else the bytes carried (a script after the
 *    image's end, a second format in the same file) is not in the stored file.
 *    A file that does not decode whole is refused (`invalid_image`).
 */
export async function checkImage(input: Buffer, limits: CheckLimits, claimedType?: string): Promise<CheckedImage> {
  const type = sniff(input);
  if (!type) {
    if (looksLikeMarkup(input)) throw new FileError('unsupported_type', 'SVG and HTML files cannot be added: only PNG, JPEG, WebP and GIF images');
    throw new FileError('unsupported_type', 'Only PNG, JPEG, WebP and GIF images can be added');
  }
  const claimed = claimedType?.split(';')[0].trim().toLowerCase();
  if (claimed?.startsWith('image/') && claimed !== type && !(claimed === 'image/jpg' && type === 'image/jpeg')) {
    throw new FileError('type_mismatch', `The file says it is ${claimed} but its bytes are ${type}`);
  }
  let meta: Metadata;
  try {
    // the header only: nothing is decoded yet
    meta = await sharp(input, { limitInputPixels: false }).metadata();
  } catch {
    throw new FileError('invalid_image', 'This file is damaged or not a complete image');
  }
  if (meta.format !== SHARP_FORMAT[type]) throw new FileError('invalid_image', 'This file is damaged or not a complete image');
  const width = meta.width ?? 0;
  const height = meta.pageHeight ?? meta.height ?? 0;
  if (!width || !height) throw new FileError('invalid_image', 'This file is damaged or not a complete image');
  if (width * height > limits.maxPixels) {
    throw new FileError('too_many_pixels', `This image has more than ${Math.round(limits.maxPixels / 1e6)} megapixels`);
  }
  try {
    // limitInputPixels again: the decoder refuses by itself whatever the header did not say
    const img = sharp(input, { limitInputPixels: limits.maxPixels, failOn: 'error', pages: 1, sequentialRead: true }).rotate();
    const out =
      type === 'image/jpeg'
        ? img.jpeg({ quality: 85 })
        : type === 'image/webp'
          ? img.webp({ quality: 85 })
          : img.png({ compressionLevel: 6, adaptiveFiltering: true });
    const { data, info } = await out.toBuffer({ resolveWithObject: true });
    const stored: StoredType = type === 'image/gif' ? 'image/png' : type;
    return { id: createHash('sha256').update(data).digest('hex'), type: stored, bytes: data, width: info.width, height: info.height };
  } catch (err) {
    if (err instanceof FileError) throw err;
    throw new FileError('invalid_image', 'This file is damaged or not a complete image');
  }
}
