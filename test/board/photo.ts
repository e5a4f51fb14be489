import { randomBytes } from 'node:crypto';
import sharp from 'sharp';

/**
 * A phone photo as a test or a benchmark needs one: `width` x `height` JPEG of smooth colour fields
 * (a room, a sky) under a sensor's grain, at quality 100, with the EXIF a phone writes (make, model and
 * a GPS position). 4032 x 3024 is about 12 MB, as a phone's own.
 */
export async function phonePhoto(width = 4032, height = 3024): Promise<Buffer> {
  const base = await sharp(randomBytes(64 * 48 * 3), { raw: { width: 64, height: 48, channels: 3 } }).resize(width, height, { kernel: 'cubic', fit: 'fill' }).raw().toBuffer();
  const grain = randomBytes(width * height * 3);
  for (let i = 0; i < base.length; i++) base[i] = Math.max(0, Math.min(255, base[i] + ((grain[i] & 31) - 16)));
  return sharp(base, { raw: { width, height, channels: 3 } })
    .jpeg({ quality: 100 })
    .withExif({ IFD0: { Make: 'PhoneMaker', Model: 'SecretPhone' }, IFD3: { GPSLatitudeRef: 'N', GPSLatitude: '55/1 45/1 21/1', GPSLongitudeRef: 'E', GPSLongitude: '37/1 37/1 4/1' } })
    .toBuffer();
}
