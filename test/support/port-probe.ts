/** Whether a TCP port on 127.0.0.1 refuses connections: how the tests see that a server they started has stopped. */
import net from 'node:net';

/** True once nothing accepts on 127.0.0.1:`port`; false while something does. */
export function refused(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(false);
    });
    socket.once('error', () => resolve(true));
  });
}
